import { randomUUID } from 'node:crypto';
import type { DataSource, EntityManager } from 'typeorm';
import { buildStatements, type IdempotencyStatements } from './idempotency.sql.js';
import type { ResponseCipher } from './response-cipher.js';
import { StoredResponseCodec, type StoredRow } from './stored-response.codec.js';
import type {
  ClaimOutcome,
  ClaimRequest,
  CleanupResult,
  CompletedRecord,
  Completion,
  IdempotencyStore,
  Lease,
  ReplayEvent,
} from './interfaces/idempotency-store.interface.js';

interface Queryable {
  query(config: { name?: string; text: string; values: unknown[] }): Promise<{
    rows: Record<string, unknown>[];
    rowCount: number | null;
  }>;
}
interface Pool extends Queryable {
  connect(): Promise<Queryable & { release(err?: boolean): void }>;
}

interface ExistingRow extends StoredRow {
  id: string;
  claimed: boolean;
  status: 'in_progress' | 'completed' | null;
  same_request: boolean;
  stale: boolean;
  expires_at: Date | null;
  seconds_left: number | null;
}

/** Rounds of claim → conflicting row vanished / takeover lost; each round is one more statement. */
const MAX_CLAIM_ROUNDS = 5;

/**
 * The PostgreSQL store. It talks to the pool of the app's TypeORM `DataSource` directly with
 * named prepared statements: one round trip per claim, one per completion.
 */
export class PostgresIdempotencyStore implements IdempotencyStore {
  private readonly sql: IdempotencyStatements;
  private readonly codec: StoredResponseCodec;
  private isolation?: Promise<string>;

  constructor(
    private readonly dataSource: DataSource,
    private readonly tableName: string,
    /** Seals stored responses (the `encryption` option); null keeps them in plaintext. */
    cipher: ResponseCipher | null = null,
  ) {
    if (dataSource.options.type !== 'postgres') {
      throw new Error(
        `nestjs-pg-idempotency needs a PostgreSQL DataSource, got "${dataSource.options.type}"`,
      );
    }
    this.sql = buildStatements(tableName);
    this.codec = new StoredResponseCodec(cipher);
  }

  private get pool(): Pool {
    return (this.dataSource.driver as unknown as { master: Pool }).master;
  }

  async claim(req: ClaimRequest): Promise<ClaimOutcome> {
    const token = randomUUID();
    const scope = [req.key, req.endpoint, req.userId, req.requestHash];
    const claimed = {
      key: req.key,
      endpoint: req.endpoint,
      userId: req.userId,
      requestHash: req.requestHash,
    };
    let insert = true;
    let lockedStale: string | undefined;
    for (let round = 0; round < MAX_CLAIM_ROUNDS; round++) {
      const { rows } = insert
        ? await this.pool.query({
            ...this.sql.claim,
            values: [...scope, token, req.leaseSeconds, req.ttlSeconds],
          })
        : await this.pool.query({ ...this.sql.existing, values: scope });
      const row = rows[0] as unknown as ExistingRow | undefined;
      // No row after an insert: the conflicting row was committed after this statement's
      // snapshot, so read it. No row after a read: it was deleted since, so insert again.
      insert = !insert;
      if (!row) continue;
      if (row.claimed) return { type: 'claimed', lease: { id: row.id, token, claimed } };
      // Stale but skipped by the takeover: a live transaction holds it (see `lockClaim`).
      if (row.stale && row.id === lockedStale) return { type: 'in_progress' };
      if (row.stale) {
        const taken = await this.pool.query({
          ...this.sql.takeover,
          values: [row.id, req.requestHash, token, req.leaseSeconds, req.ttlSeconds],
        });
        const id = taken.rows[0]?.id as string | undefined;
        if (id) return { type: 'claimed', lease: { id, token, claimed } };
        lockedStale = row.id;
        insert = false;
        continue;
      }
      if (!row.same_request) return { type: 'mismatch' };
      if (row.status === 'in_progress') return { type: 'in_progress' };
      return {
        type: 'completed',
        recordId: row.id,
        expiresAt: row.expires_at as Date,
        secondsLeft: row.seconds_left as number,
        response: this.codec.fromRow(row, claimed),
      };
    }
    throw new Error('nestjs-pg-idempotency: claim did not settle; too much contention on one key');
  }

  async complete(
    lease: Lease,
    c: Completion,
    transaction?: EntityManager,
  ): Promise<CompletedRecord | null> {
    const kept = this.codec.toColumns(lease, c);
    const values = [
      lease.id,
      lease.token,
      c.statusCode,
      kept.headers,
      kept.raw,
      kept.json,
      c.transactionId,
      c.ttlSeconds,
      kept.keyId,
      kept.digest,
    ];
    const { rows } = await this.on(transaction).query({ ...this.sql.complete, values });
    const row = rows[0] as { expires_at: Date; seconds_left: number } | undefined;
    return row ? { expiresAt: row.expires_at, secondsLeft: row.seconds_left } : null;
  }

  async lockInTransaction(lease: Lease, transaction: EntityManager): Promise<boolean> {
    this.isolation ??= this.pool
      .query({ text: this.sql.isolation, values: [] })
      .then(({ rows }) => String(rows[0]?.isolation));
    const isolation = await this.isolation.catch((err: Error) => {
      this.isolation = undefined;
      throw err;
    });
    if (isolation === 'read committed') return false;
    const { rowCount } = await this.on(transaction).query({
      ...this.sql.lockClaim,
      values: [lease.id, lease.token],
    });
    if (rowCount !== 1) throw new Error('nestjs-pg-idempotency: the claim was lost');
    return true;
  }

  /** The transaction's own pg client (so prepared statements are reused there too), or the pool. */
  private on(transaction?: EntityManager): Queryable {
    if (!transaction?.queryRunner) return this.pool;
    return (transaction.queryRunner as unknown as { databaseConnection: Queryable })
      .databaseConnection;
  }

  async recordReplays(replays: readonly ReplayEvent[]): Promise<void> {
    if (replays.length === 0) return;
    await this.pool.query({
      ...this.sql.recordReplays,
      values: [
        replays.map((r) => r.recordId),
        replays.map((r) => r.replayedAt),
        replays.map((r) => r.expiresAt),
      ],
    });
  }

  async release(lease: Lease): Promise<boolean> {
    const { rowCount } = await this.pool.query({
      ...this.sql.release,
      values: [lease.id, lease.token],
    });
    return rowCount === 1;
  }

  async renew(lease: Lease, leaseSeconds: number): Promise<boolean> {
    const { rowCount } = await this.pool.query({
      ...this.sql.renew,
      values: [lease.id, lease.token, leaseSeconds],
    });
    return rowCount === 1;
  }

  async cleanup(options: { batchSize: number; retentionSeconds: number }): Promise<CleanupResult> {
    const lockName = `nestjs-pg-idempotency:cleanup:${this.tableName}`;
    const client = await this.pool.connect();
    try {
      const { rows } = await client.query({ text: this.sql.cleanupLock, values: [lockName] });
      if (!rows[0]?.locked) return { ran: false, deleted: 0, batches: 0, longestBatchMs: 0 };
      const startedAt = new Date();
      let deleted = 0;
      let batches = 0;
      let longestBatchMs = 0;
      try {
        for (const [index, text] of this.sql.cleanupBatches.entries()) {
          for (;;) {
            const started = performance.now();
            const { rowCount } = await client.query({
              text,
              values: [options.batchSize, options.retentionSeconds],
            });
            longestBatchMs = Math.max(longestBatchMs, performance.now() - started);
            batches++;
            // Records count as deleted; replay events of those records go with them.
            if (index < 2) deleted += rowCount ?? 0;
            if ((rowCount ?? 0) < options.batchSize) break;
          }
        }
        await client.query({ text: this.sql.cleanupRun, values: [startedAt, deleted, batches] });
      } finally {
        await client.query({ text: this.sql.cleanupUnlock, values: [lockName] });
      }
      return { ran: true, deleted, batches, longestBatchMs: Math.round(longestBatchMs) };
    } finally {
      client.release();
    }
  }
}
