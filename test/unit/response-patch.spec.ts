import { afterEach, describe, expect, it } from '@jest/globals';
import express, { type Response } from 'express';
import { request, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { holdResponse, type WireResponse } from '../../lib/transports/http/response-capture.js';
import { silencePlatformReply } from '../../lib/transports/http/response-replay.js';

const allow = new Set(['content-type']);
const names = ['writeHead', 'write', 'end', 'flushHeaders'];
type Handler = (res: Response) => void;

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

/** A real Express app on loopback; each GET /n is answered by `handlers[n]`. */
async function expressApp(handlers: Handler[]) {
  const app = express();
  app.get('/:n', (req, res) => handlers[Number(req.params.n)](res));
  const server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  servers.push(server);
  const get = (n: number) =>
    new Promise<{ status: number; body: string }>((resolve, reject) => {
      const port = (server.address() as AddressInfo).port;
      const req = request({ port, host: '127.0.0.1', path: `/${n}` }, (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on('error', reject);
      req.end();
    });
  return { app, get };
}

/** Holds `res`, recording what was captured; the response is released once stored. */
function held(res: ServerResponse, captured: WireResponse[], body: string): void {
  holdResponse(res, allow, {
    onEnd: async (wire) => void captured.push(wire),
    onUncapturable: async () => undefined,
  });
  res.statusCode = 201;
  res.end(body);
}

describe("holdResponse on an Express app's responses", () => {
  it('patches them with no own method and no change of prototype; others pass untouched', async () => {
    const captured: WireResponse[] = [];
    const seen: { own: string[]; sameProto: boolean }[] = [];
    const { app, get } = await expressApp([
      (res) => {
        holdResponse(res, allow, {
          onEnd: async (wire) => {
            captured.push(wire);
            seen.push({
              own: names.filter((n) => Object.hasOwn(res, n)),
              sameProto: Object.getPrototypeOf(res) === app.response,
            });
          },
          onUncapturable: async () => undefined,
        });
        res.statusCode = 201;
        res.end('held');
      },
      (res) => void res.status(202).send('plain'),
    ]);
    expect(await get(0)).toEqual({ status: 201, body: 'held' });
    expect(await get(1)).toEqual({ status: 202, body: 'plain' });
    expect(await get(0)).toEqual({ status: 201, body: 'held' });
    expect(captured.map((w) => w.body.toString())).toEqual(['held', 'held']);
    expect(seen).toEqual([
      { own: [], sameProto: true },
      { own: [], sameProto: true },
    ]);
  });

  it('still holds a response once the app gives its response prototype its own end', async () => {
    const captured: WireResponse[] = [];
    const wrapped: string[] = [];
    const { app, get } = await expressApp([(res) => held(res, captured, 'first')]);
    expect(await get(0)).toEqual({ status: 201, body: 'first' });
    const end = app.response.end;
    app.response.end = function (this: ServerResponse, ...args: unknown[]) {
      wrapped.push('end');
      return (end as (...a: unknown[]) => ServerResponse).apply(this, args);
    } as typeof end;
    expect(await get(0)).toEqual({ status: 201, body: 'first' });
    expect(captured.map((w) => w.body.toString())).toEqual(['first', 'first']);
    expect(wrapped).toEqual(['end']);
  });

  it('calls a method patched above the app after its first held response (looked up per call)', async () => {
    const captured: WireResponse[] = [];
    const calls: string[] = [];
    const { get } = await expressApp([
      (res) => held(res, captured, 'x'),
      (res) => void res.send('plain'),
    ]);
    expect(await get(0)).toEqual({ status: 201, body: 'x' });
    const above = express.response as unknown as Record<string, unknown>;
    const hadOwn = Object.hasOwn(above, 'writeHead');
    const writeHead = above.writeHead as (...a: unknown[]) => unknown;
    above.writeHead = function (this: ServerResponse, ...args: unknown[]) {
      calls.push('writeHead');
      return writeHead.apply(this, args);
    };
    try {
      expect(await get(0)).toEqual({ status: 201, body: 'x' });
      expect(await get(1)).toEqual({ status: 200, body: 'plain' });
    } finally {
      if (hadOwn) above.writeHead = writeHead;
      else delete above.writeHead;
    }
    expect(calls).toEqual(['writeHead', 'writeHead']);
    expect(captured).toHaveLength(2);
  });
});

describe("silencePlatformReply on an Express app's responses", () => {
  it('silences status/send/redirect on the replayed response only, with no own method and no change of prototype', async () => {
    const seen: { own: string[]; sameProto: boolean; thrown: unknown }[] = [];
    const { app, get } = await expressApp([
      (res) => {
        res.statusCode = 201;
        res.end('replayed');
        silencePlatformReply(res);
        let thrown: unknown = null;
        try {
          res.status(500).send('late');
          res.redirect(303, '/late');
        } catch (e) {
          thrown = e;
        }
        seen.push({
          own: ['status', 'send', 'redirect'].filter((n) => Object.hasOwn(res, n)),
          sameProto: Object.getPrototypeOf(res) === app.response,
          thrown,
        });
      },
      (res) => void res.status(202).send('plain'),
      (res) => void res.redirect(303, '/next'),
    ]);
    expect(await get(0)).toEqual({ status: 201, body: 'replayed' });
    expect(await get(1)).toEqual({ status: 202, body: 'plain' });
    expect((await get(2)).status).toBe(303);
    expect(await get(0)).toEqual({ status: 201, body: 'replayed' });
    expect(seen).toEqual([
      { own: [], sameProto: true, thrown: null },
      { own: [], sameProto: true, thrown: null },
    ]);
  });

  /**
   * A replayed response whose late `status(500).send('late')` must do nothing, then `send` is
   * wrapped where `target(app)` says; the replay is still silenced and other responses pass.
   */
  async function silencedAfterWrapping(target: (app: express.Express) => { send: unknown }) {
    const sends: unknown[] = [];
    const { app, get } = await expressApp([
      (res) => {
        res.statusCode = 201;
        res.end('replayed');
        silencePlatformReply(res);
        res.status(500).send('late');
      },
      (res) => void res.send('plain'),
    ]);
    expect(await get(0)).toEqual({ status: 201, body: 'replayed' });
    const send = express.response.send;
    target(app).send = function (this: Response, body: unknown) {
      sends.push(body);
      return send.call(this, body);
    };
    expect(await get(0)).toEqual({ status: 201, body: 'replayed' });
    expect(await get(1)).toEqual({ status: 200, body: 'plain' });
    expect(sends).toEqual(['plain']);
  }

  it('still silences a response once the app gives its response prototype its own send', () =>
    silencedAfterWrapping((app) => app.response));

  it("still silences a response once other code replaces a method on the app's layer", () =>
    silencedAfterWrapping((app) => Object.getPrototypeOf(app.response) as { send: unknown }));
});
