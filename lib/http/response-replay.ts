import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { StoredResponse } from '../store/idempotency-store.interface.js';
import { BODY_HEADERS, headersArg, patch, type Patchable } from './response-patch.js';

function applyStoredHead(
  res: ServerResponse,
  stored: StoredResponse,
  replayedHeader: string,
  head?: OutgoingHttpHeaders,
): void {
  const drop = new Set([...BODY_HEADERS, ...Object.keys(stored.headers)]);
  for (const name of drop) res.removeHeader(name);
  if (head) {
    for (const name of Object.keys(head)) if (drop.has(name.toLowerCase())) delete head[name];
  }
  for (const [name, value] of Object.entries(stored.headers)) res.setHeader(name, value);
  const body = stored.body ?? Buffer.alloc(0);
  if (stored.statusCode !== 204 && stored.statusCode !== 304) {
    res.setHeader('content-length', body.length);
  }
  res.setHeader(replayedHeader, 'true');
  res.statusCode = stored.statusCode;
}

/**
 * Lets the platform send its (empty) reply for a replayed request, but swaps status, body
 * headers and body for the stored ones on the way out: the replay is byte-identical.
 */
export function substituteResponse(
  res: ServerResponse,
  stored: StoredResponse,
  replayedHeader: string,
): void {
  const body = stored.body ?? Buffer.alloc(0);
  const { original, restore } = patch(res, {
    writeHead(...args: unknown[]) {
      (res as Patchable).writeHead = original.writeHead;
      const head = headersArg(args);
      applyStoredHead(res, stored, replayedHeader, head);
      return head
        ? original.writeHead.call(res, stored.statusCode, head)
        : original.writeHead.call(res, stored.statusCode);
    },
    write: () => true,
    end(...args: unknown[]) {
      restore();
      if (!res.headersSent) applyStoredHead(res, stored, replayedHeader);
      const callback = args.find((a) => typeof a === 'function');
      return original.end.call(res, body, callback);
    },
  });
}

/** For handlers that own the response (`@Res()`): the platform will not reply, so write it. */
export function writeStoredResponse(
  res: ServerResponse,
  stored: StoredResponse,
  replayedHeader: string,
): void {
  applyStoredHead(res, stored, replayedHeader);
  res.end(stored.body ?? Buffer.alloc(0));
}
