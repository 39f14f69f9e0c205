import { createHmac, createSecretKey, type KeyObject } from 'node:crypto';
import type { IdempotencyScope } from '../interfaces/idempotency-store.interface.js';

/** Shorter secrets could be guessed offline from derived keys seen downstream. */
export const MIN_DERIVED_KEY_SECRET_BYTES = 32;

/** The `derivedKeySecret` option as a key, validated once at start-up; null when not set. */
export function derivedKeySecret(value: string | Buffer | undefined): KeyObject | null {
  if (value === undefined) return null;
  const bytes = typeof value === 'string' ? Buffer.from(value, 'utf8') : value;
  if (!Buffer.isBuffer(bytes) || bytes.length < MIN_DERIVED_KEY_SECRET_BYTES) {
    throw new Error(
      `nestjs-pg-idempotency: derivedKeySecret must be a string or Buffer of at least ${MIN_DERIVED_KEY_SECRET_BYTES} bytes`,
    );
  }
  return createSecretKey(bytes);
}

/** A step or derived-key name: 1 to 255 characters, no NUL (it is stored and hashed as is). */
export function checkStepName(what: string, name: unknown): string {
  if (typeof name !== 'string' || name.length === 0 || name.length > 255 || name.includes('\0')) {
    throw new TypeError(
      `nestjs-pg-idempotency: ${what} name must be a string of 1 to 255 characters without NUL`,
    );
  }
  return name;
}

/**
 * HMAC-SHA256 of the record's scope and `name` under the deployment's secret, hex: the same for
 * every run of the scope on every instance, unrelated across scopes and names, and not computable
 * from the inbound key without the secret.
 */
export function deriveKey(secret: KeyObject, scope: IdempotencyScope, name: string): string {
  const input = JSON.stringify([
    'nestjs-pg-idempotency:derived-key:v1',
    scope.userId,
    scope.endpoint,
    scope.key,
    name,
  ]);
  return createHmac('sha256', secret).update(input).digest('hex');
}
