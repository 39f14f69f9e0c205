import { Injectable, Logger, type OnModuleInit, Optional } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { ServerResponse } from 'node:http';
import type { WireResponse } from '../../execution/handler-outcome.js';
import { headEntries, replayableHeaders } from './response-headers.js';

/** Beside the response, not a new key on it (a slow-path store per request). */
const slots = new WeakMap<ServerResponse, PreEncoding>();

/** A held response's payload as Fastify serialized it, before any `onSend` plugin encoded it. */
export interface PreEncoding {
  /** Kept as Fastify gave it: converted only when an encoding makes it the stored body. */
  payload?: string | Buffer;
  /** Its `content-encoding` then: none, unless the handler encoded the body itself. */
  encoding?: string;
  /** The first payload Fastify serialized, with the status and headers it was to go with. */
  first?: { payload: string | Buffer; encoding?: string; statusCode: number; headers: object };
  /** Fastify serialized another payload after it: its answer to an error (a failed send). */
  resent?: boolean;
}

/** Asks the Fastify `onSend` hook to keep this response's payload before it is encoded. */
export function watchPreEncoding(res: ServerResponse): PreEncoding {
  const slot: PreEncoding = {};
  slots.set(res, slot);
  return slot;
}

interface FastifyReplyLike {
  raw: ServerResponse;
  getHeader(name: string): unknown;
  getHeaders(): object;
}

/**
 * A global `onSend` hook runs before the route-level ones a plugin such as `@fastify/compress`
 * adds: the payload here is what the client gets once decoded, whatever it becomes afterwards.
 */
export function preEncodingHook(
  _request: unknown,
  reply: FastifyReplyLike,
  payload: unknown,
  done: (err: null, payload: unknown) => void,
): void {
  const slot = slots.get(reply.raw);
  if (slot && (typeof payload === 'string' || Buffer.isBuffer(payload))) {
    if (slot.first) slot.resent = true;
    slot.payload = payload;
    const encoding = reply.getHeader('content-encoding');
    slot.encoding = typeof encoding === 'string' ? encoding : undefined;
    slot.first ??= {
      payload,
      encoding: slot.encoding,
      statusCode: reply.raw.statusCode,
      headers: reply.getHeaders(),
    };
  }
  done(null, payload);
}

/**
 * The outcome as stored when something encoded the payload after it was serialized (a
 * compression plugin turning it into gzip, or into a stream): the bytes before the encoding,
 * without the encoding's header. Undefined when nothing encoded it: the wire bytes are the outcome.
 */
export function beforeEncoding(
  wire: WireResponse,
  res: ServerResponse,
  slot: PreEncoding,
  head: unknown[] | undefined,
): WireResponse | undefined {
  if (slot.payload === undefined) return undefined;
  const written = headEntries(head ?? []).filter(
    ([name]) => name.toLowerCase() === 'content-encoding',
  );
  const encoding = written[written.length - 1]?.[1] ?? res.getHeader('content-encoding');
  if (encoding === undefined || encoding === slot.encoding) return undefined;
  const { 'content-encoding': _encoded, ...kept } = wire.headers;
  if (slot.encoding !== undefined) kept['content-encoding'] = slot.encoding;
  const body = Buffer.isBuffer(slot.payload) ? slot.payload : Buffer.from(slot.payload);
  return { statusCode: wire.statusCode, headers: kept, body };
}

/**
 * What Fastify serialized first for a client that had left, when its send failed: an encoding
 * plugin's stream to a closed socket errors, and Fastify answers that with a `500` of its own,
 * through the `onSend` hooks again (the status line is still held), which is not the handler's
 * outcome. Undefined when nothing was serialized.
 */
export function serializedBeforeFailure(
  slot: PreEncoding,
  allow: ReadonlySet<string>,
): WireResponse | undefined {
  const first = slot.first;
  if (first === undefined) return undefined;
  const headers = replayableHeaders(first.headers, allow, 'content-encoding');
  if (first.encoding !== undefined) headers['content-encoding'] = first.encoding;
  const body = Buffer.isBuffer(first.payload) ? first.payload : Buffer.from(first.payload);
  return { statusCode: first.statusCode, headers, body };
}

/** Installs `preEncodingHook` on a Fastify application, before it is ready. */
@Injectable()
export class PreEncodingCapture implements OnModuleInit {
  constructor(@Optional() private readonly host?: HttpAdapterHost) {}

  onModuleInit(): void {
    const adapter = this.host?.httpAdapter;
    if (adapter?.getType() !== 'fastify') return;
    const fastify = adapter.getInstance<{ addHook(name: 'onSend', hook: unknown): void }>();
    try {
      fastify.addHook('onSend', preEncodingHook);
    } catch (err) {
      new Logger('Idempotency').warn(
        `Fastify was ready before the idempotency module started; responses a plugin compresses are completed without a body: ${(err as Error).message}`,
      );
    }
  }
}
