import type { Lease } from '../../interfaces/idempotency-store.interface.js';
import { ResponseCipher } from '../../response-cipher.js';
import type { RecoveryPointStatements } from './recovery-points.sql.js';
import { bound, type QueryConfig } from './pg-deadline.js';

type Query = (config: QueryConfig) => Promise<{ rows: Record<string, unknown>[] }>;

/** Binds a sealed step result to its scope, request and step name (never to another record's). */
function stepAad(lease: Lease, name: string): Buffer {
  const c = lease.claimed;
  if (!c) throw new Error('nestjs-pg-idempotency: the lease does not say what it claimed');
  return ResponseCipher.aad(['step', c.userId, c.endpoint, c.key, c.requestHash, name]);
}

/**
 * Recovery points in `<table>_steps`: the result's JSON text in plaintext, or sealed with the
 * response cipher when the `encryption` option is set (headers unused, the text as body).
 */
export class PostgresRecoveryPoints {
  constructor(
    private readonly sql: RecoveryPointStatements,
    private readonly query: Query,
    private readonly cipher: ResponseCipher | null,
  ) {}

  async load(lease: Lease, name: string): Promise<string | null> {
    const { rows } = await this.query(bound(this.sql.load, [lease.id, lease.token, name]));
    const row = rows[0] as { result: Buffer; result_key_id: string | null } | undefined;
    if (!row) return null;
    if (row.result_key_id === null) return row.result.toString('utf8');
    // Never a silent "not found" for a step that ran: re-running it could repeat a charge.
    if (!this.cipher) {
      throw new Error(
        `nestjs-pg-idempotency: step ${JSON.stringify(name)} was sealed but the encryption option is not set`,
      );
    }
    const opened = this.cipher.open(row.result_key_id, row.result, stepAad(lease, name));
    return opened.body.toString('utf8');
  }

  async save(lease: Lease, name: string, result: string): Promise<boolean> {
    let bytes: Buffer = Buffer.from(result, 'utf8');
    let keyId: string | null = null;
    if (this.cipher) {
      const sealed = this.cipher.seal({ headers: {}, body: bytes }, stepAad(lease, name));
      [bytes, keyId] = [sealed.sealed, sealed.keyId];
    }
    const { rows } = await this.query(
      bound(this.sql.save, [lease.id, lease.token, name, bytes, keyId]),
    );
    return rows.length === 1;
  }
}
