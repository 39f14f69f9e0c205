import { Logger } from '@nestjs/common';
import type {
  Completion,
  Lease,
  StoredResponse,
} from '../../interfaces/idempotency-store.interface.js';
import { ResponseCipher } from '../../response-cipher.js';
import { jsonCopy } from './json-copy.js';

/** The response columns of a completed row, as the claim statement returns them. */
export interface StoredRow {
  id: string;
  status_code: number | null;
  response_headers: Record<string, string> | null;
  response_raw: Buffer | null;
  response_key_id: string | null;
  /** `response_digest IS NOT NULL`: a `storeResponse: 'digest'` route kept no body. */
  digested: boolean;
}

type Claimed = NonNullable<Lease['claimed']>;

/** Binds a sealed response to its row, scope, request and status. */
function responseAad(recordId: string, c: Claimed, statusCode: number): Buffer {
  return ResponseCipher.aad([recordId, c.userId, c.endpoint, c.key, c.requestHash, statusCode]);
}

/**
 * What of a response goes into a row, and back: everything in plaintext, a digest only, or
 * (with the `encryption` option) headers and body sealed together in `response_raw`.
 */
export class StoredResponseCodec {
  private readonly logger = new Logger('Idempotency');

  constructor(private readonly cipher: ResponseCipher | null) {}

  toColumns(lease: Lease, c: Completion) {
    const none = { headers: null, raw: null, json: null, keyId: null, digest: null };
    if (c.bodyDigest) return { ...none, digest: c.bodyDigest };
    if (!this.cipher) {
      // The queryable jsonb copy, when PostgreSQL can take the body as jsonb.
      const json =
        c.body && !c.bytesOnly
          ? (jsonCopy({ headers: c.headers, body: c.body })?.text ?? null)
          : null;
      return { ...none, headers: c.headers, raw: c.body, json };
    }
    // Encrypted: no plaintext copy at all (nor headers); a response without body is not replayed.
    if (c.body === null) return none;
    if (!lease.claimed) throw new Error('the lease does not say what it claimed; cannot seal');
    const { keyId, sealed } = this.cipher.seal(
      { headers: c.headers, body: c.body },
      responseAad(lease.id, lease.claimed, c.statusCode),
    );
    return { ...none, raw: sealed, keyId };
  }

  /** A completed row as a response to replay; never a body that did not decrypt and verify. */
  fromRow(row: StoredRow, claimed: Claimed): StoredResponse {
    const statusCode = row.status_code as number;
    const headers = row.response_headers ?? {};
    if (row.response_raw === null) {
      return { statusCode, headers, body: null, omitted: row.digested ? 'digest' : 'too_large' };
    }
    if (row.response_key_id === null) return { statusCode, headers, body: row.response_raw };
    try {
      if (!this.cipher) throw new Error('the encryption option is not set');
      const opened = this.cipher.open(
        row.response_key_id,
        row.response_raw,
        responseAad(row.id, claimed, statusCode),
      );
      return { statusCode, ...opened };
    } catch (err) {
      this.logger.error(
        `Cannot decrypt the stored response of record ${row.id} (key id ${JSON.stringify(row.response_key_id)}): ${(err as Error).message}; answering 409 instead of replaying it`,
      );
      return { statusCode, headers: {}, body: null, omitted: 'undecryptable' };
    }
  }
}
