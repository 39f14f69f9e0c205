import { routeEndpoint } from './http-adapter.utils.js';
import type { IdempotencyRequest } from '../interfaces/idempotency-module-options.interface.js';
import { canonicalJson } from '../execution/request-fingerprint.js';
import { uploadedFiles } from './uploaded-files.js';

/**
 * What the request addresses, as the router understood it: the route pattern, its params, the
 * parsed query (sorted keys) and the uploaded files. Spellings the router treats as one route
 * (`/payments/`, `/PAYMENTS`, `?b=2&a=1` vs `?a=1&b=2`) give the same target; other param values
 * do not. One line per part: canonical JSON never contains a raw newline.
 */
export async function requestTarget(req: IdempotencyRequest): Promise<string> {
  const files = await uploadedFiles(req);
  return [
    routeEndpoint(req),
    canonicalJson(req.params ?? {}),
    canonicalJson(req.query ?? {}),
    files === undefined ? '' : canonicalJson(files),
  ].join('\n');
}
