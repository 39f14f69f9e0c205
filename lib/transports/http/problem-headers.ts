import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import {
  PROBLEM_CONTENT_TYPE,
  type IdempotencyProblemException,
} from '../../idempotency.problems.js';

/**
 * Gives the problem its headers (`application/problem+json`, `Retry-After`) when, and only when,
 * its own body is what goes out: an app's exception filter that renders the error its own way
 * sends its own body under its own headers.
 */
export function setProblemHeadersOnRender(
  res: ServerResponse,
  problem: IdempotencyProblemException,
): void {
  const headers = { 'content-type': PROBLEM_CONTENT_TYPE, ...lower(problem.headers) };
  const type = (problem.getResponse() as { type: string }).type;
  const { writeHead, end } = res;
  let head: unknown[] | undefined;
  const restore = () => Object.assign(res, { writeHead, end });
  Object.assign(res, {
    writeHead(...args: unknown[]) {
      head = args;
      return res;
    },
    end(...args: unknown[]) {
      restore();
      const status = typeof head?.[0] === 'number' ? head[0] : res.statusCode;
      if (status === problem.getStatus() && (isProblem(args[0], type) || bodiless(res, args[0]))) {
        const given = head?.find((a): a is OutgoingHttpHeaders => isHeaders(a));
        for (const name of Object.keys(given ?? {})) {
          if (name.toLowerCase() in headers) delete given![name];
        }
        for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
      }
      if (head) writeHead.apply(res, head as Parameters<typeof writeHead>);
      return end.apply(res, args as Parameters<typeof end>);
    },
  });
}

function isProblem(chunk: unknown, type: string): boolean {
  if (typeof chunk !== 'string' && !Buffer.isBuffer(chunk)) return false;
  try {
    return (JSON.parse(chunk.toString()) as { type?: unknown })?.type === type;
  } catch {
    return false;
  }
}

/** A HEAD answer: the platform sends no body to recognize, only the headers of the one it built. */
function bodiless(res: ServerResponse, chunk: unknown): boolean {
  return res.req?.method === 'HEAD' && (chunk == null || typeof chunk === 'function');
}

function isHeaders(value: unknown): boolean {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function lower(headers: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
}
