import { routeEndpoint } from './http-adapter.utils.js';
import type { IdempotencyRequest } from '../interfaces/idempotency-module-options.interface.js';
import { canonicalJson, canonicalJsonOfRecord } from '../execution/request-fingerprint.js';
import { uploadedFiles } from './uploaded-files.js';

/**
 * What the request addresses, as the router understood it: the route pattern, its params, the
 * parsed query (sorted keys) and the uploaded files. Spellings the router treats as one route
 * (`/payments/`, `/PAYMENTS`, `?b=2&a=1` vs `?a=1&b=2`) give the same target; other param values
 * do not. One line per part: canonical JSON never contains a raw newline.
 */
export function requestTarget(
  req: IdempotencyRequest,
  method: string = req.method,
): string | Promise<string> {
  const target = `${routeEndpoint(req, method)}\n${canonicalJsonOfRecord(req.params)}\n${canonicalJsonOfRecord(req.query)}\n`;
  // Synchronous unless there are uploads to hash: a cached replay then needs no await at all.
  if (!req.file && !req.files) return target;
  return uploadedFiles(req).then(
    (files) => target + (files === undefined ? '' : canonicalJson(files)),
  );
}
