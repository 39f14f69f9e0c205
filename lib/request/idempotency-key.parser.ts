/** Why a key header was refused; becomes the problem's `detail`. */
export class InvalidIdempotencyKeyError extends Error {}

export const MAX_KEY_LENGTH = 255;

/**
 * Finds the key header in a name/value list (a message's headers, or `keyHeader(req)`) and
 * validates it: sent twice, or as a list, it is refused. Returns undefined when the header is absent.
 * Accepts a bare token or an RFC 8941 sf-string (`"..."`); both name the same key.
 */
export function parseIdempotencyKey(
  rawHeaders: readonly string[],
  lowerName: string,
): string | undefined {
  let value: string | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i];
    if (name.length === lowerName.length && name.toLowerCase() === lowerName) {
      if (value !== undefined) {
        throw new InvalidIdempotencyKeyError(`The ${lowerName} header must be sent once`);
      }
      value = rawHeaders[i + 1];
    }
  }
  if (value === undefined) return undefined;
  const key = unquote(trimOws(value));
  if (key.length === 0) throw new InvalidIdempotencyKeyError('The idempotency key is empty');
  if (key.length > MAX_KEY_LENGTH) {
    throw new InvalidIdempotencyKeyError(
      `The idempotency key is longer than ${MAX_KEY_LENGTH} characters`,
    );
  }
  return key;
}

/**
 * Strips HTTP optional whitespace (RFC 9110 OWS: SP and HTAB only). String.prototype.trim() would
 * also strip U+00A0 and other Unicode spaces, which Node's parser lets through as obs-text bytes,
 * so `<key>\xA0` would be taken as `<key>` instead of being refused as non-ASCII.
 */
function trimOws(value: string): string {
  let start = 0;
  let end = value.length;
  while (start < end && isOws(value.charCodeAt(start))) start++;
  while (end > start && isOws(value.charCodeAt(end - 1))) end--;
  return value.slice(start, end);
}

function isOws(c: number): boolean {
  return c === 0x20 || c === 0x09;
}

function unquote(value: string): string {
  if (!value.startsWith('"')) {
    // A bare key: visible ASCII only, no list separators, no quotes.
    for (let i = 0; i < value.length; i++) {
      const c = value.charCodeAt(i);
      if (c < 0x21 || c > 0x7e || c === 0x2c || c === 0x22) {
        throw new InvalidIdempotencyKeyError(
          'The idempotency key may only contain printable ASCII characters without spaces, commas or quotes (or be a quoted string)',
        );
      }
    }
    return value;
  }
  let out = '';
  for (let i = 1; i < value.length; i++) {
    const ch = value[i];
    const c = value.charCodeAt(i);
    if (ch === '\\') {
      const next = value[i + 1];
      if (next !== '"' && next !== '\\') {
        throw new InvalidIdempotencyKeyError('The quoted idempotency key has an invalid escape');
      }
      out += next;
      i++;
    } else if (ch === '"') {
      if (i !== value.length - 1) {
        throw new InvalidIdempotencyKeyError(
          'The quoted idempotency key has characters after its closing quote',
        );
      }
      return out;
    } else if (c < 0x20 || c > 0x7e) {
      throw new InvalidIdempotencyKeyError(
        'The idempotency key may only contain printable ASCII characters',
      );
    } else {
      out += ch;
    }
  }
  throw new InvalidIdempotencyKeyError('The quoted idempotency key has no closing quote');
}
