import { randomUUID } from 'node:crypto';
import type {
  ClaimOutcome,
  ClaimRequest,
  CleanupResult,
  CompletedRecord,
  Completion,
  IdempotencyScope,
  IdempotencyStore,
  Lease,
  PeekOutcome,
  ReplayEvent,
  StoredResponse,
} from '../interfaces/idempotency-store.interface.js';

/** A replay row as the store keeps it: the event, stamped with the store's clock. */
export interface RecordedReplay extends ReplayEvent {
  firstReplayedAt: Date;
  replayedAt: Date;
}

interface MemoryRecord {
  id: string;
  requestHash: string;
  token: string;
  status: 'in_progress' | 'completed';
  lockedUntil: number;
  expiresAt: number;
  response?: StoredResponse;
  replayCount: number;
  /** Runs it took: one more per takeover of an abandoned run of the same request. */
  runs: number;
}

/** A recovery point of `ctx.step()`, as this store keeps it. */
export interface MemoryStep {
  result: string;
  run: number;
  resumedCount: number;
}

/**
 * An `IdempotencyStore` in process memory, for the unit tests of apps that use the library: no
 * PostgreSQL needed. Same guarantees as the PostgreSQL store within one process (every method
 * runs to completion before another starts), no transactions (transactional routes refuse to
 * start with it). Time comes from `now`, so a test can move it.
 * @example
 * let t = Date.now();
 * const store = new InMemoryIdempotencyStore({ now: () => t });
 * t += 61_000; // past the lease: an unfinished claim can be taken over
 */
export class InMemoryIdempotencyStore implements IdempotencyStore {
  private readonly records = new Map<string, MemoryRecord>();
  private readonly now: () => number;
  /** Every replay row recorded (one per record per flush), oldest first. */
  readonly replays: RecordedReplay[] = [];
  /** Recovery points by record id, then step name. */
  readonly steps = new Map<string, Map<string, MemoryStep>>();

  constructor(options: { now?: () => number } = {}) {
    // This store's clock plays the database's: the one all stored moments come from.
    this.now = options.now ?? (() => Date.now());
  }

  /** How many records (in progress and completed) the store holds. */
  get size(): number {
    return this.records.size;
  }

  async claim(req: ClaimRequest): Promise<ClaimOutcome> {
    const scope = JSON.stringify([req.key, req.endpoint, req.userId]);
    const now = this.now();
    const found = this.records.get(scope);
    if (!found || this.stale(found, now)) {
      const resumes = found?.status === 'in_progress' && found.requestHash === req.requestHash;
      const record: MemoryRecord = {
        id: randomUUID(),
        requestHash: req.requestHash,
        token: randomUUID(),
        status: 'in_progress',
        lockedUntil: now + req.leaseSeconds * 1000,
        expiresAt: now + req.ttlSeconds * 1000,
        replayCount: 0,
        runs: resumes ? found.runs + 1 : 1,
      };
      this.records.set(scope, record);
      const carried = resumes ? this.steps.get(found.id) : undefined;
      if (carried) this.steps.set(record.id, carried);
      if (found) this.steps.delete(found.id);
      const { key, endpoint, userId, requestHash } = req;
      const claimed = { key, endpoint, userId, requestHash };
      const lease = { id: record.id, token: record.token, claimed, run: record.runs };
      return { type: 'claimed', lease };
    }
    return this.existing(found, req.requestHash, now);
  }

  async peek(scope: IdempotencyScope, requestHash: string): Promise<PeekOutcome> {
    const now = this.now();
    const found = this.records.get(JSON.stringify([scope.key, scope.endpoint, scope.userId]));
    if (!found || this.stale(found, now)) return { type: 'absent' };
    return this.existing(found, requestHash, now);
  }

  /** What a live record answers a claim (or a peek) of `requestHash`. */
  private existing(found: MemoryRecord, requestHash: string, now: number) {
    if (found.requestHash !== requestHash) return { type: 'mismatch' } as const;
    if (found.status === 'in_progress' || !found.response) return { type: 'in_progress' } as const;
    const { body } = found.response;
    return {
      type: 'completed',
      recordId: found.id,
      expiresAt: new Date(found.expiresAt),
      secondsLeft: (found.expiresAt - now) / 1000,
      response: { ...found.response, body: body && Buffer.from(body) },
    } as const;
  }

  private stale(found: MemoryRecord, now: number): boolean {
    return (found.status === 'completed' ? found.expiresAt : found.lockedUntil) <= now;
  }

  async complete(lease: Lease, c: Completion): Promise<CompletedRecord | null> {
    const record = this.owned(lease);
    if (!record) return null;
    const now = this.now();
    record.status = 'completed';
    record.expiresAt = now + c.ttlSeconds * 1000;
    record.response = c.bodyDigest
      ? { statusCode: c.statusCode, headers: {}, body: null, omitted: 'digest' }
      : c.body === null
        ? {
            statusCode: c.statusCode,
            headers: { ...c.headers },
            body: null,
            omitted: c.omitted ?? 'too_large',
          }
        : { statusCode: c.statusCode, headers: { ...c.headers }, body: Buffer.from(c.body) };
    return { expiresAt: new Date(record.expiresAt), secondsLeft: c.ttlSeconds };
  }

  async recordReplays(replays: readonly ReplayEvent[]): Promise<void> {
    const now = this.now();
    for (const replay of replays) {
      this.replays.push({
        ...replay,
        firstReplayedAt: new Date(now - replay.firstReplayedMsAgo),
        replayedAt: new Date(now - replay.replayedMsAgo),
      });
      const record = [...this.records.values()].find((r) => r.id === replay.recordId);
      if (record) record.replayCount += replay.count;
    }
  }

  async release(lease: Lease): Promise<boolean> {
    for (const [scope, record] of this.records) {
      if (record === this.owned(lease)) {
        this.steps.delete(record.id);
        return this.records.delete(scope);
      }
    }
    return false;
  }

  async renew(lease: Lease, leaseSeconds: number): Promise<boolean> {
    const record = this.owned(lease);
    if (record) record.lockedUntil = this.now() + leaseSeconds * 1000;
    return record !== undefined;
  }

  async cleanup(options: { batchSize: number; retentionSeconds: number }): Promise<CleanupResult> {
    const now = this.now();
    const before = now - options.retentionSeconds * 1000;
    let deleted = 0;
    for (const [scope, record] of this.records) {
      const free = record.status === 'completed' || record.lockedUntil < now;
      if (record.expiresAt < before && free) {
        deleted += Number(this.records.delete(scope));
        this.steps.delete(record.id);
      }
    }
    for (let i = this.replays.length - 1; i >= 0; i--) {
      if (this.replays[i].expiresAt.getTime() < before) this.replays.splice(i, 1);
    }
    return {
      ran: true,
      deleted,
      batches: Math.floor(deleted / options.batchSize) + 1,
      longestBatchMs: 0,
    };
  }

  async loadStep(lease: Lease, name: string): Promise<string | null> {
    const step = this.owned(lease) && this.steps.get(lease.id)?.get(name);
    if (!step) return null;
    step.resumedCount += 1;
    return step.result;
  }

  async saveStep(lease: Lease, name: string, result: string): Promise<boolean> {
    const record = this.owned(lease);
    const steps = this.steps.get(lease.id) ?? new Map<string, MemoryStep>();
    if (!record || steps.has(name)) return false;
    steps.set(name, { result, run: record.runs, resumedCount: 0 });
    this.steps.set(lease.id, steps);
    return true;
  }

  /** The runs a record took (see `Lease.run`), by record id. */
  runsOf(recordId: string): number | undefined {
    return [...this.records.values()].find((r) => r.id === recordId)?.runs;
  }

  /** The record in progress under this lease's token, if it still is. */
  private owned(lease: Lease): MemoryRecord | undefined {
    for (const record of this.records.values()) {
      if (record.id === lease.id) {
        return record.token === lease.token && record.status === 'in_progress' ? record : undefined;
      }
    }
    return undefined;
  }
}
