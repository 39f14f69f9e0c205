/**
 * silencePlatformReply: after a replay, what Nest calls to reply to the route's `undefined`
 * (status, send, and a @Redirect() route's redirect) does nothing, on that response only.
 */
import { describe, expect, it } from '@jest/globals';
import { silencePlatformReply } from '../../lib/transports/http/response-replay.js';

/** Stands in for Express's app.response / Fastify's Reply: the platform's methods on a prototype. */
class PlatformReply {
  sent: unknown[] = [];
  status(code: number) {
    this.sent.push(code);
    return this;
  }
  send(body: unknown) {
    this.sent.push(body);
    return this;
  }
  redirect(...args: unknown[]) {
    this.sent.push(['redirect', ...args]);
    return this;
  }
}

describe('silencePlatformReply', () => {
  it("turns the platform's status/send into no-ops on this response only, adding no property to it", () => {
    const replayed = new PlatformReply();
    const other = new PlatformReply();
    silencePlatformReply(replayed);
    expect(replayed.status(200).send('late')).toBe(replayed);
    expect(replayed.sent).toEqual([]);
    expect(Object.keys(replayed)).toEqual(['sent']);
    expect(Object.hasOwn(replayed, 'status') || Object.hasOwn(replayed, 'send')).toBe(false);
    expect(replayed).toBeInstanceOf(PlatformReply);
    other.status(201).send('body');
    expect(other.sent).toEqual([201, 'body']);
  });

  it("turns a @Redirect() route's redirect into a no-op too (Express: redirect(status, url); Fastify: status(code).redirect(url))", () => {
    const replayed = new PlatformReply();
    const other = new PlatformReply();
    silencePlatformReply(replayed);
    expect(replayed.redirect(303, '/late')).toBe(replayed);
    expect(replayed.status(303).redirect('/late')).toBe(replayed);
    expect(replayed.sent).toEqual([]);
    expect(Object.hasOwn(replayed, 'redirect')).toBe(false);
    other.redirect(303, '/next');
    expect(other.sent).toEqual([['redirect', 303, '/next']]);
  });

  it('silences a response whose redirect alone is its own property', () => {
    const res = new PlatformReply();
    const calls: unknown[] = [];
    res.redirect = (...args: unknown[]) => {
      calls.push(args);
      return res;
    };
    silencePlatformReply(res);
    res.status(302).redirect('/late');
    res.send('late');
    expect([calls, res.sent]).toEqual([[], []]);
  });

  it('silences a response whose send is its own property (a middleware replaced it)', () => {
    const res = new PlatformReply();
    const calls: unknown[] = [];
    res.send = (body: unknown) => {
      calls.push(body);
      return res;
    };
    silencePlatformReply(res);
    res.status(200);
    res.send('late');
    expect([calls, res.sent]).toEqual([[], []]);
  });

  it('puts nothing under a prototype that is not a Node response, even one with its own `app` (fastify.decorateReply)', () => {
    class DecoratedReply extends PlatformReply {}
    Object.defineProperty(DecoratedReply.prototype, 'app', { value: {} });
    const replayed = new DecoratedReply();
    silencePlatformReply(replayed);
    const other = new DecoratedReply();
    expect(replayed.status(200).send('late').sent).toEqual([]);
    expect(['writeHead', 'write', 'end', 'flushHeaders'].filter((n) => n in other)).toEqual([]);
    other.status(201).send('body');
    expect(other.sent).toEqual([201, 'body']);
  });
});
