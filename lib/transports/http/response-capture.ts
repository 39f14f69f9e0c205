import type { OutgoingHttpHeader, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { clientGone } from '../../request/http-adapter.utils.js';
import type { HoldHooks, OutcomeCapture, WireResponse } from '../../execution/handler-outcome.js';
import { BODY_HEADERS, copyHeadArgs, headEntries, replayableHeaders } from './response-headers.js';
import { patch, type Patched } from './response-patch.js';
import {
  beforeEncoding,
  serializedBeforeFailure,
  watchPreEncoding,
} from './pre-encoding-capture.js';

export type { HoldHooks, WireResponse };

function splitEnd(args: unknown[]): { chunk: unknown; encoding: BufferEncoding | undefined } {
  const chunk = typeof args[0] === 'function' ? undefined : args[0];
  const encoding = typeof args[1] === 'string' ? (args[1] as BufferEncoding) : undefined;
  return { chunk, encoding };
}

function toBuffer(chunk: unknown, encoding: BufferEncoding | undefined): Buffer {
  if (chunk === undefined || chunk === null) return Buffer.alloc(0);
  if (typeof chunk === 'string') return Buffer.from(chunk, encoding ?? 'utf8');
  return Buffer.from(chunk as Uint8Array);
}

/**
 * How an HTTP execution captures its outcome: the response is held at the socket (below), the
 * handler's observable is passed on for Nest to write.
 */
export function holdCapture(
  res: ServerResponse,
  allow: ReadonlySet<string>,
): { capture: OutcomeCapture; drop: () => void } {
  let drop = () => undefined as void;
  return {
    capture: (handled, hooks) => {
      drop = holdResponse(res, allow, hooks);
      return handled;
    },
    drop: () => drop(),
  };
}

/**
 * Holds the response of a claimed request at the socket: when the platform ends it, `onEnd`
 * stores it first, then the bytes are released. Returns what lets go of a response still unwritten. What is stored is exactly what the client gets,
 * after every interceptor, serializer and exception filter. `onEnd` may return a replacement
 * (when the outcome could not be recorded); `writeHead` is deferred so that stays possible.
 *
 * Once a response is held, anything else written to it (an exception filter answering a handler
 * that threw after `res.send()`) is dropped: the client gets the first response, the one stored.
 * A stream (a chunk written or headers flushed before `end`) cannot be stored: it waits for
 * `onUncapturable` (the key is completed without a body) before its first byte leaves, so a
 * transactional handler's writes are committed before the status line. A body a plugin encoded
 * after Fastify serialized it (`@fastify/compress`: gzip, or a gzip stream) is stored as it was
 * before: the client gets it back decoded, whatever it accepts.
 */
export function holdResponse(
  res: ServerResponse,
  allow: ReadonlySet<string>,
  hooks: Pick<HoldHooks, 'onEnd' | 'onUncapturable'>,
): () => void {
  let state: 'open' | 'held' | 'streaming' | 'released' | 'replaced' = 'open';
  let heldHead: unknown[] | undefined;
  const queued: [Patched, unknown[]][] = [];
  const preEncoding = watchPreEncoding(res);
  const pass = (method: Patched, args: unknown[]) =>
    original[method].apply(res, args as never) as unknown;
  const release = () => {
    state = 'released';
    restore();
    if (heldHead) pass('writeHead', heldHead);
  };
  const replace = (replacement: WireResponse) => {
    state = 'replaced';
    restore();
    for (const name of BODY_HEADERS) res.removeHeader(name);
    for (const [name, value] of Object.entries(replacement.headers)) res.setHeader(name, value);
    res.setHeader('content-length', replacement.body.length);
    res.statusCode = replacement.statusCode;
    pass('end', [replacement.body]);
    // The rest of the handler's stream has nowhere to go.
    patch(res, { write: () => true, end: () => res, flushHeaders: () => undefined });
  };
  const startStream = (method: Patched, args: unknown[]) => {
    state = 'streaming';
    queued.push([method, args]);
    const decoded = beforeEncoding(capture(res, allow, heldHead, []), res, preEncoding, heldHead);
    (decoded ? hooks.onEnd(decoded) : hooks.onUncapturable(res.statusCode, 'streamed'))
      .then((replacement) => {
        if (replacement) return replace(replacement);
        release();
        for (const [m, a] of queued.splice(0)) pass(m, a);
      })
      .catch((err: Error) => res.destroy(err));
  };
  const { original, restore } = patch(res, {
    writeHead(...args: unknown[]) {
      if (state === 'streaming') queued.push(['writeHead', args]);
      else if (state === 'open') {
        // A copy: Fastify passes its own headers object, which a later reply would mutate.
        heldHead = copyHeadArgs(args);
        if (typeof args[0] === 'number') res.statusCode = args[0];
      }
      return res;
    },
    write(...args: unknown[]) {
      if (state === 'open') startStream('write', args);
      else if (state === 'streaming') queued.push(['write', args]);
      return true;
    },
    flushHeaders() {
      if (state === 'open') startStream('flushHeaders', []);
      else if (state === 'streaming') queued.push(['flushHeaders', []]);
    },
    end(...args: unknown[]) {
      if (state === 'streaming') queued.push(['end', args]);
      if (state !== 'open') return res;
      state = 'held';
      const sent = capture(res, allow, heldHead, args);
      // The client left and Fastify answered its failed send (a compressed stream) itself.
      const failed = clientGone(res) && preEncoding.resent === true;
      const wire =
        (failed && serializedBeforeFailure(preEncoding, allow)) ||
        (beforeEncoding(sent, res, preEncoding, heldHead) ?? sent);
      const snapshot = { status: res.statusCode, headers: res.getHeaders() };
      hooks
        .onEnd(wire)
        .catch(() => undefined)
        .then((replacement) => {
          if (replacement) {
            if (heldHead) mergeHead(res, heldHead);
            return replace(replacement);
          }
          restoreSnapshot(res, snapshot);
          release();
          return pass('end', args);
        })
        .catch((err: Error) => res.destroy(err));
      return res;
    },
  });
  // Let go of a response nothing was written to yet (its run was concluded without one).
  return () => {
    if (state !== 'open') return;
    state = 'released';
    restore();
  };
}

/**
 * Undoes whatever a later writer changed while the first response was held. Only what differs is
 * touched: removing a header deletes a property of the response's header map, which slows every
 * later header access on it.
 */
function restoreSnapshot(
  res: ServerResponse,
  snapshot: { status: number; headers: OutgoingHttpHeaders },
): void {
  const now = res.getHeaders();
  for (const name in now) if (!(name in snapshot.headers)) res.removeHeader(name);
  for (const name in snapshot.headers) {
    const value = snapshot.headers[name];
    if (value !== undefined && now[name] !== value) res.setHeader(name, value);
  }
  res.statusCode = snapshot.status;
}

function mergeHead(res: ServerResponse, head: unknown[]): void {
  for (const [name, value] of headEntries(head)) {
    if (value !== undefined) res.setHeader(name, value as OutgoingHttpHeader);
  }
}

/** The response as it would leave: status, allow-listed headers (incl. `writeHead`'s), body. */
function capture(
  res: ServerResponse,
  allow: ReadonlySet<string>,
  heldHead: unknown[] | undefined,
  endArgs: unknown[],
): WireResponse {
  const { chunk, encoding } = splitEnd(endArgs);
  // getHeaders() returns a fresh object: no copy needed to add writeHead's headers to it.
  const all = res.getHeaders();
  for (const [name, value] of headEntries(heldHead ?? [])) {
    all[name.toLowerCase()] = value as OutgoingHttpHeader | undefined;
  }
  const headers = replayableHeaders(all, allow);
  return { statusCode: res.statusCode, headers, body: toBuffer(chunk, encoding) };
}
