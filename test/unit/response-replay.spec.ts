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
});
