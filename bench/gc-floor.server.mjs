// A server with no database and no Nest, for `npm run bench:gc-floor`: what the HTTP layer alone
// leaves to the garbage collector per request. Started with the GC observer preloaded; prints its
// port. BENCH_FLOOR says which server:
// - node-http: node:http answering from the request callback;
// - node-http-prototype: the same, giving the request and the response a prototype of their own
//   as Express 5 does on every request (`Object.setPrototypeOf(req, app.request)`, same for res);
// - express: an Express 5 app with one route, no middleware, answering with `res.json`;
// - express-weakset, express-buffer, express-finish: the Express app, and per response what a
//   replay adds: the response put in a WeakSet (the silenced replies), the body ended as a Buffer
//   with its length set (a stored body), a `once('finish')` listener with a closure (the audit's);
// - express-layer: the Express app with the library's dispatcher layer under `app.response`;
//   express-layer-late: the same layer put there after 1 000 requests (the library puts it there at
//   its first capture, as express-layer does; this one tests it arriving after Express warmed up);
// - node-http-weakmap: node:http keeping an 8 KB value per request in a WeakMap keyed by the
//   request, never deleted (what a per-request WeakMap entry costs until its key dies).
import { Buffer } from 'node:buffer';
import http from 'node:http';
import { createRequire } from 'node:module';

const floor = process.env.BENCH_FLOOR ?? 'node-http';
const answer = (res) => {
  res.statusCode = 201;
  res.setHeader('content-type', 'application/json');
  res.end('{"ok":true}');
};
const expressApp = (route, setUp = () => undefined) => {
  const app = createRequire(import.meta.url)('express')();
  setUp(app);
  app.post('/payments', route);
  return http.createServer(app);
};
/** What response-patch.ts puts under `app.response`: dispatchers looking each method up per call. */
const dispatcherLayer = (app) => {
  const above = Object.getPrototypeOf(app.response);
  const patches = new WeakMap();
  const silenced = new WeakSet();
  const methods = {};
  for (const name of ['writeHead', 'write', 'end', 'flushHeaders']) {
    methods[name] = function (...args) {
      return (patches.get(this)?.[name] ?? above[name]).apply(this, args);
    };
  }
  for (const name of ['status', 'send', 'redirect']) {
    const method = above[name];
    methods[name] = function (...args) {
      return silenced.has(this) ? this : method.apply(this, args);
    };
  }
  Object.setPrototypeOf(
    app.response,
    Object.create(above, Object.getOwnPropertyDescriptors(methods)),
  );
};
const servers = {
  'node-http': () => http.createServer((_req, res) => answer(res)),
  'node-http-prototype': () => {
    const request = Object.create(http.IncomingMessage.prototype);
    const response = Object.create(http.ServerResponse.prototype);
    return http.createServer((req, res) => {
      Object.setPrototypeOf(req, request);
      Object.setPrototypeOf(res, response);
      answer(res);
    });
  },
  express: () => expressApp((_req, res) => res.status(201).json({ ok: true })),
  'express-weakset': () => {
    const silenced = new WeakSet();
    return expressApp((_req, res) => {
      silenced.add(res);
      res.status(201).json({ ok: true });
    });
  },
  'express-buffer': () => {
    const body = Buffer.from('{"ok":true}');
    return expressApp((_req, res) => {
      res.setHeader('content-type', 'application/json');
      res.setHeader('content-length', body.length);
      res.statusCode = 201;
      res.end(body);
    });
  },
  'express-finish': () => {
    let finished = 0;
    return expressApp((_req, res) => {
      const replay = { count: 1 };
      res.once('finish', () => (finished += replay.count));
      res.status(201).json({ ok: true });
    });
  },
  'express-layer': () =>
    expressApp((_req, res) => res.status(201).json({ ok: true }), dispatcherLayer),
  'express-layer-late': () => {
    let served = 0;
    let app;
    return expressApp(
      (_req, res) => {
        if (++served === 1000) dispatcherLayer(app);
        res.status(201).json({ ok: true });
      },
      (created) => (app = created),
    );
  },
  'node-http-weakmap': () => {
    const kept = new WeakMap();
    return http.createServer((req, res) => {
      kept.set(req, new Array(1000).fill(1.5));
      answer(res);
    });
  },
};
const make = servers[floor];
if (!make) throw new Error(`BENCH_FLOOR: one of ${Object.keys(servers).join(', ')}`);
const server = make();
server.listen(0, '127.0.0.1', () => console.log(`PORT ${server.address().port}`));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
