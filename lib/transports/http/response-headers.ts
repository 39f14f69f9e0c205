/** Headers describing the body (a replay takes them from storage only), and cookies (never replayed). */
export const BODY_HEADERS = [
  'set-cookie',
  'content-length',
  'content-type',
  'content-encoding',
  'transfer-encoding',
  'etag',
  'last-modified',
];

/**
 * `writeHead(status[, message][, headers])`'s headers argument, in the form it was given: an
 * object, or an array (Node's flat `[name, value, name, value]`, or `[name, value]` pairs).
 */
export function headersArg(args: readonly unknown[]): object | undefined {
  const last = args[args.length - 1];
  return last && typeof last === 'object' ? last : undefined;
}

/** A copy of `writeHead`'s arguments whose headers argument is a copy of its own, same form. */
export function copyHeadArgs(args: readonly unknown[]): unknown[] {
  const headers = headersArg(args);
  return args.map((a) =>
    a !== headers
      ? a
      : Array.isArray(a)
        ? a.map((e: unknown) => (Array.isArray(e) ? [...e] : e))
        : { ...(a as object) },
  );
}

/**
 * `writeHead`'s headers as name/value entries in the order given, whichever form they came in
 * (Node sets them one by one over the response's own, a later one of a name winning). Array
 * entries without a name are skipped, as Node does.
 */
export function headEntries(args: readonly unknown[]): [string, unknown][] {
  const headers = headersArg(args);
  if (headers === undefined) return [];
  if (!Array.isArray(headers)) return Object.entries(headers);
  const entries: [string, unknown][] = [];
  const pairs = Array.isArray(headers[0]);
  for (let i = 0; i < headers.length; i += pairs ? 1 : 2) {
    const [name, value] = pairs ? (headers[i] as unknown[]) : [headers[i], headers[i + 1]];
    if (name) entries.push([String(name), value]);
  }
  return entries;
}

/** The allow-listed headers of `all` as they are stored: one string each, lists joined. */
export function replayableHeaders(
  all: object,
  allow: ReadonlySet<string>,
  except?: string,
): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(all) as [string, unknown][]) {
    if (!allow.has(name) || value === undefined || name === except) continue;
    headers[name] = Array.isArray(value) ? value.join(', ') : String(value);
  }
  return headers;
}
