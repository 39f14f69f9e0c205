/**
 * holdResponse on real Node responses: what it stores (status, allow-listed headers, including
 * those writeHead was given in any of Node's forms, and body), when the held bytes leave, and the
 * replacement it sends instead.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import { createServer, request, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { holdResponse, type WireResponse } from '../../lib/transports/http/response-capture.js';

const allow = new Set(['content-type']);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Waits for the server side to get there (a busy machine may take longer than any fixed sleep). */
async function until(reached: () => boolean): Promise<void> {
  while (!reached()) await sleep(10);
}

interface Received {
  status: number;
  headers: Record<string, unknown>;
  body: string;
}

/** A real server and client over loopback: `handle` writes the response under test. */
async function exchange(handle: (res: ServerResponse) => void) {
  const server: Server = createServer((_req, res) => handle(res));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  servers.push(server);
  let firstByte = false;
  const received = new Promise<Received>((resolve, reject) => {
    const req = request(
      { port: (server.address() as AddressInfo).port, host: '127.0.0.1' },
      (res) => {
        firstByte = true;
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
  return { received, started: () => firstByte };
}

function gate<T = void>() {
  let open!: (value: T) => void;
  const promise = new Promise<T>((r) => (open = r));
  return { promise, open };
}

const servers: Server[] = [];
afterEach(async () => {
  // A failed test may leave a response held open: drop it, or the run never exits.
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

describe('holdResponse on a real ServerResponse', () => {
  it('holds the response until onEnd resolves, then releases exactly what was captured', async () => {
    const stored = gate();
    const captured: WireResponse[] = [];
    const { received, started } = await exchange((res) => {
      holdResponse(res, allow, {
        onEnd: async (wire) => {
          captured.push(wire);
          await stored.promise;
        },
        onUncapturable: async () => undefined,
      });
      res.statusCode = 201;
      res.setHeader('content-type', 'application/json');
      res.setHeader('x-not-allowed', '1');
      res.end('{"id":1}');
    });
    await until(() => captured.length > 0);
    await sleep(50);
    expect(started()).toBe(false);
    expect(captured).toEqual([
      {
        statusCode: 201,
        headers: { 'content-type': 'application/json' },
        body: Buffer.from('{"id":1}'),
      },
    ]);
    stored.open();
    expect(await received).toMatchObject({
      status: 201,
      body: '{"id":1}',
      headers: { 'x-not-allowed': '1' },
    });
  });

  it('leaves the response as it found it: no own methods added, its prototype back once released', async () => {
    const seen: {
      ownDuring: string[];
      protoDuring: boolean;
      ownAfter: string[];
      protoAfter: boolean;
    }[] = [];
    const names = ['writeHead', 'write', 'end', 'flushHeaders'];
    const { received } = await exchange((res) => {
      const proto = Object.getPrototypeOf(res) as object;
      holdResponse(res, allow, {
        onEnd: async () => {
          seen.push({
            ownDuring: names.filter((n) => Object.hasOwn(res, n)),
            protoDuring: Object.getPrototypeOf(res) === proto,
            ownAfter: [],
            protoAfter: false,
          });
        },
        onUncapturable: async () => undefined,
      });
      res.once('finish', () => {
        seen[0].ownAfter = names.filter((n) => Object.hasOwn(res, n));
        seen[0].protoAfter = Object.getPrototypeOf(res) === proto;
      });
      res.end('done');
    });
    expect((await received).body).toBe('done');
    await until(() => seen.length > 0 && seen[0].protoAfter);
    expect(seen).toEqual([{ ownDuring: [], protoDuring: false, ownAfter: [], protoAfter: true }]);
  });

  it("holds a response whose write/end another middleware already replaced (Express's compression)", async () => {
    const stored = gate();
    const captured: string[] = [];
    const wrapped: string[] = [];
    const { received, started } = await exchange((res) => {
      // As `compression` does: own properties that wrap the prototype's methods.
      const { write, end } = res;
      res.write = function (this: ServerResponse, ...args: unknown[]) {
        wrapped.push('write');
        return (write as (...a: unknown[]) => boolean).apply(this, args);
      } as ServerResponse['write'];
      res.end = function (this: ServerResponse, ...args: unknown[]) {
        wrapped.push('end');
        return (end as (...a: unknown[]) => ServerResponse).apply(this, args);
      } as ServerResponse['end'];
      holdResponse(res, allow, {
        onEnd: async (wire) => {
          captured.push(wire.body.toString());
          await stored.promise;
        },
        onUncapturable: async () => undefined,
      });
      res.end('wrapped body');
    });
    await until(() => captured.length > 0);
    await sleep(50);
    expect(started()).toBe(false);
    expect(wrapped).toEqual([]);
    stored.open();
    expect((await received).body).toBe('wrapped body');
    expect(captured).toEqual(['wrapped body']);
    expect(wrapped).toEqual(['end']);
  });

  it('drops a second writer while the first response is held (the first is what was stored)', async () => {
    const stored = gate();
    const { received } = await exchange((res) => {
      holdResponse(res, allow, {
        onEnd: () => stored.promise,
        onUncapturable: async () => undefined,
      });
      res.statusCode = 200;
      res.end('first');
      // An exception filter answering a handler that threw after sending.
      res.statusCode = 500;
      res.setHeader('x-filter', 'yes');
      res.end('second');
      stored.open();
    });
    const got = await received;
    expect(got).toMatchObject({ status: 200, body: 'first' });
    expect(got.headers['x-filter']).toBeUndefined();
  });

  // writeHead's headers may be Node's flat [name, value, ...] array, or [name, value] pairs, as
  // well as an object: each form is stored, and reaches the client as it was given.
  it.each([
    ['a flat array', ['Content-Type', 'application/json', 'X-Not-Allowed', '1']],
    [
      'an array of pairs',
      [
        ['Content-Type', 'application/json'],
        ['X-Not-Allowed', '1'],
      ],
    ],
    ['an object', { 'Content-Type': 'application/json', 'X-Not-Allowed': '1' }],
  ])('stores the headers writeHead was given as %s', async (_form, headers) => {
    const captured: WireResponse[] = [];
    const { received } = await exchange((res) => {
      holdResponse(res, allow, {
        onEnd: async (wire) => void captured.push(wire),
        onUncapturable: async () => undefined,
      });
      res.writeHead(201, headers as never);
      res.end('{"id":1}');
    });
    expect(await received).toMatchObject({
      status: 201,
      body: '{"id":1}',
      headers: { 'content-type': 'application/json', 'x-not-allowed': '1' },
    });
    expect(captured).toEqual([
      {
        statusCode: 201,
        headers: { 'content-type': 'application/json' },
        body: Buffer.from('{"id":1}'),
      },
    ]);
  });

  it("passes writeHead's flat array on as an array, copied, once the response is stored", async () => {
    const captured: WireResponse[] = [];
    const passed: unknown[] = [];
    const { received } = await exchange((res) => {
      const writeHead = res.writeHead;
      // Below the hold (as the prototype's own): what Node is finally given.
      Object.setPrototypeOf(
        res,
        Object.create(Object.getPrototypeOf(res) as object, {
          writeHead: {
            value: function (this: ServerResponse, ...args: unknown[]) {
              passed.push(args[1]);
              return (writeHead as (...a: unknown[]) => unknown).apply(this, args);
            },
          },
        }),
      );
      holdResponse(res, allow, {
        onEnd: async (wire) => void captured.push(wire),
        onUncapturable: async () => undefined,
      });
      const headers = ['Content-Type', 'text/plain'];
      res.writeHead(200, headers);
      headers[1] = 'text/html'; // changed after the call: neither stored nor sent
      res.end('ok');
    });
    expect((await received).headers['content-type']).toBe('text/plain');
    expect(captured[0].headers).toEqual({ 'content-type': 'text/plain' });
    expect(passed).toEqual([['Content-Type', 'text/plain']]);
  });

  it("keeps writeHead's flat-array headers under a replacement sent instead", async () => {
    const replacement: WireResponse = {
      statusCode: 503,
      headers: { 'content-type': 'application/problem+json' },
      body: Buffer.from('{}'),
    };
    const { received } = await exchange((res) => {
      holdResponse(res, allow, {
        onEnd: async () => replacement,
        onUncapturable: async () => undefined,
      });
      res.writeHead(201, ['Content-Type', 'application/json', 'X-Trace', 't1']);
      res.end('{"id":1}');
    });
    expect(await received).toMatchObject({
      status: 503,
      headers: { 'content-type': 'application/problem+json', 'x-trace': 't1' },
    });
  });

  it('gates a stream on onUncapturable (streamed): no byte leaves before it resolves, then all of it does', async () => {
    const committed = gate();
    let streamed = 0;
    const { received, started } = await exchange((res) => {
      holdResponse(res, allow, {
        onEnd: async () => {
          throw new Error('a stream is never offered for storage');
        },
        onUncapturable: async (status, reason) => {
          expect([status, reason]).toEqual([200, 'streamed']);
          streamed++;
          await committed.promise;
        },
      });
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('a');
      res.write('b');
      res.end('c');
    });
    await until(() => streamed > 0);
    await sleep(50);
    expect(started()).toBe(false);
    expect(streamed).toBe(1);
    committed.open();
    expect(await received).toMatchObject({ status: 200, body: 'abc' });
  });

  it.each(['end', 'stream'] as const)(
    'sends the replacement onEnd/onUncapturable returns (%s)',
    async (how) => {
      const replacement: WireResponse = {
        statusCode: 503,
        headers: { 'content-type': 'application/problem+json' },
        body: Buffer.from('{"code":"idempotency_store_unavailable"}'),
      };
      const { received } = await exchange((res) => {
        holdResponse(res, allow, {
          onEnd: async () => replacement,
          onUncapturable: async () => replacement,
        });
        res.statusCode = 201;
        if (how === 'stream') res.write('partial');
        res.end('{"id":1}');
      });
      expect(await received).toMatchObject({
        status: 503,
        body: '{"code":"idempotency_store_unavailable"}',
        headers: { 'content-type': 'application/problem+json' },
      });
    },
  );
});
