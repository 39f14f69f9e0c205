import { routeEndpoint } from './http-adapter.utils.js';
import type { IdempotencyRequest } from '../interfaces/idempotency-module-options.interface.js';
import { canonicalJson, canonicalJsonOfRecord } from '../execution/request-fingerprint.js';
import { hasUploads, uploadedFiles } from './uploaded-files.js';

/** What of the route's declaration tells handlers on one path apart (`IdempotentRoute`). */
export interface RouteMarks {
  version?: string;
  hosts?: string;
  /** A host pattern matches many names (a RegExp, or params): the name is part of the request. */
  hostVaries?: boolean;
}

/**
 * What the request addresses, as the router understood it: the route pattern, its params, the
 * parsed query (sorted keys), the host name of a host-param route
 * (`@Controller({ host: ':tenant.example.com' })`), the controller's declared host patterns, the
 * handler's version and the uploaded files.
 * Spellings the router treats as one route (`/payments/`, `/PAYMENTS`, `?b=2&a=1` vs `?a=1&b=2`)
 * give the same target; other param values, hosts and versions do not. One line per part:
 * canonical JSON never contains a raw newline. The host, hosts and version lines are left out when there
 * are none, so other routes' hashes stay what they were.
 */
export function requestTarget(
  req: IdempotencyRequest,
  method: string = req.method,
  route: RouteMarks = {},
): string | Promise<string> {
  const { version, hosts, hostVaries } = route;
  let target = `${routeEndpoint(req, method)}\n${canonicalJsonOfRecord(req.params)}\n${canonicalJsonOfRecord(req.query)}\n`;
  // Nest sets `req.hosts` (to `{}` at least) on every request of a host-bound controller. The
  // host name, which Nest matched (case-insensitively), not its params: with several patterns
  // (`[':tenant.a.com', ':tenant.b.com']`) x.a.com and x.b.com give the same params.
  if (hostVaries || (req.hosts !== undefined && canonicalJsonOfRecord(req.hosts) !== '{}')) {
    target += `host ${JSON.stringify(String(req.hostname ?? '').toLowerCase())}\n`;
  }
  if (hosts !== undefined) target += `hosts ${hosts}\n`;
  if (version !== undefined) target += `version ${version}\n`;
  // Synchronous unless there are uploads to hash: a cached replay then needs no await at all.
  if (!hasUploads(req)) return target;
  return uploadedFiles(req).then(
    (files) => target + (files === undefined ? '' : canonicalJson(files)),
  );
}
