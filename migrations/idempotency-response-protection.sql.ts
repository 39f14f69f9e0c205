import { sqlNames } from './idempotency-audit.sql.js';

function tables(tableName: string): string[] {
  const { records, archive } = sqlNames(tableName);
  return [records, archive];
}

/**
 * Columns for protected responses, on the records table and its archive (which copies records
 * column by column, ciphertext as ciphertext): `response_key_id`, the id of the key that sealed
 * `response_raw` (null: plaintext), and `response_digest`, the SHA-256 of a body that was not kept.
 */
export function responseProtectionUp(tableName = 'idempotency_keys'): string[] {
  return tables(tableName).map(
    (t) => `ALTER TABLE ${t}
  ADD COLUMN IF NOT EXISTS response_key_id varchar(64),
  ADD COLUMN IF NOT EXISTS response_digest char(64)`,
  );
}

/**
 * Without `response_key_id` a sealed body would read as plaintext and replay as garbage, so
 * sealed bodies are dropped first: those records then answer `409 ..._not_replayable`.
 */
export function responseProtectionDown(tableName = 'idempotency_keys'): string[] {
  return tables(tableName).flatMap((t) => [
    `UPDATE ${t} SET response_raw = NULL WHERE response_key_id IS NOT NULL`,
    `ALTER TABLE ${t} DROP COLUMN IF EXISTS response_digest, DROP COLUMN IF EXISTS response_key_id`,
  ]);
}

export const RESPONSE_PROTECTION_UP = responseProtectionUp();
export const RESPONSE_PROTECTION_DOWN = responseProtectionDown();
