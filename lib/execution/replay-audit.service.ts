import {
  Inject,
  Injectable,
  Logger,
  type BeforeApplicationShutdown,
  type OnModuleInit,
} from '@nestjs/common';
import { IDEMPOTENCY_STORE } from '../idempotency.constants.js';
import { IDEMPOTENCY_RESOLVED_OPTIONS } from '../idempotency-internal.constants.js';
import type { ResolvedIdempotencyOptions } from '../idempotency.defaults.js';
import type {
  IdempotencyStore,
  RefusalEvent,
  ReplayEvent,
} from '../interfaces/idempotency-store.interface.js';
import { telemetry } from '../telemetry/idempotency.telemetry.js';

/** What is audited of a request answered from a record: its replay, or why it was refused. */
export type AuditKind = 'replay' | RefusalEvent['kind'];

/**
 * Buffered rows are written at once past half the bound (never below this many), without waiting
 * for the timer: a burst of replays over many records is written in a few large statements, and
 * replays of one record within an interval stay one row.
 */
const MIN_EAGER_FLUSH_AT = 1_000;
const DAY_MS = 86_400_000;

/** What the audit holds and has given up on, for monitoring. */
export interface ReplayAuditCounts {
  /** Replays buffered or in the batch being written. */
  pending: number;
  /** Records those replays belong to (one row each); never more than `replayAuditMaxBuffered`. */
  pendingRecords: number;
  /** Replays dropped because `replayAuditMaxBuffered` records were pending, since start. */
  dropped: number;
  /** Replays whose write failed (database error or timeout), since start. */
  lost: number;
}

/** The replays of one record since the last flush, within one UTC day. */
interface Tally {
  kind: AuditKind;
  /** Empty for a refusal without a committed record. */
  recordId: string;
  expiresAt: Date;
  count: number;
  /** `performance.now()` of the first and the last replay. */
  first: number;
  last: number;
  day: number;
}

/** Durations, not app moments: the store stamps them with the database's clock. */
const toEvent = (t: Tally, now: number): ReplayEvent => ({
  recordId: t.recordId,
  count: t.count,
  firstReplayedMsAgo: now - t.first,
  replayedMsAgo: now - t.last,
  expiresAt: t.expiresAt,
});

const toRefusal = (t: Tally, now: number): RefusalEvent => ({
  recordId: t.recordId || null,
  kind: t.kind as RefusalEvent['kind'],
  count: t.count,
  firstRefusedMsAgo: now - t.first,
  refusedMsAgo: now - t.last,
  expiresAt: t.expiresAt,
});

/**
 * Records replays (and refusals: 409 in progress, mismatches, responses not replayable) for the
 * audit trail without a write per replay: they are counted per record in memory and written as one row per record in one statement per flush, off the request path.
 * A record's count never spans UTC days (the daily views stay exact). One write at a time, and
 * a bounded buffer: a database that hangs costs audit events, never memory.
 */
@Injectable()
export class ReplayAuditService implements OnModuleInit, BeforeApplicationShutdown {
  private readonly logger = new Logger('IdempotencyReplayAudit');
  private tallies = new Map<string, Tally>();
  /** Tallies closed by midnight (UTC) before their flush. */
  private closed: Tally[] = [];
  private buffered = 0;
  private timer?: NodeJS.Timeout;
  private writing?: Promise<void>;
  private inFlight = 0;
  private inFlightRecords = 0;
  private dropped = 0;
  private droppedUnreported = 0;
  private lost = 0;
  private readonly eagerFlushAt: number;

  constructor(
    @Inject(IDEMPOTENCY_RESOLVED_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    @Inject(IDEMPOTENCY_STORE) private readonly store: IdempotencyStore,
  ) {
    this.eagerFlushAt = Math.max(MIN_EAGER_FLUSH_AT, options.replayAuditMaxBuffered / 2);
  }

  onModuleInit(): void {
    if (this.options.replayAudit === 'off') return;
    this.timer = setInterval(() => this.tick(), this.options.replayAuditFlushMs);
    this.timer.unref();
  }

  get counts(): ReplayAuditCounts {
    return {
      pending: this.buffered + this.inFlight,
      pendingRecords: this.rows + this.inFlightRecords,
      dropped: this.dropped,
      lost: this.lost,
    };
  }

  private get rows(): number {
    return this.tallies.size + this.closed.length;
  }

  record(recordId: string, expiresAt: Date, kind: AuditKind = 'replay'): void {
    if (this.options.replayAudit === 'off') return;
    const now = performance.now();
    // The wall clock only splits rows at the app's UTC midnight (the stamps come from the
    // database): an app clock that is off moves that split, so one flush interval of a record's
    // replays may land in the database's next day; it never moves a stamp.
    const day = Math.floor(Date.now() / DAY_MS);
    const key = kind === 'replay' ? recordId : `${kind}:${recordId}`;
    const tally = this.tallies.get(key);
    if (tally !== undefined && tally.day === day) {
      tally.count++;
      tally.last = now;
      this.buffered++;
      return;
    }
    if (this.rows + this.inFlightRecords >= this.options.replayAuditMaxBuffered) {
      this.dropped++;
      this.droppedUnreported++;
      telemetry.auditDropped();
      return;
    }
    if (tally !== undefined) this.closed.push(tally);
    this.tallies.set(key, { kind, recordId, expiresAt, count: 1, first: now, last: now, day });
    this.buffered++;
    if (this.rows >= this.eagerFlushAt && !this.writing) void this.flush();
  }

  /** Writes what is buffered; resolves when it is in the database (or logged as lost). */
  async flush(): Promise<void> {
    while (this.writing) await this.writing;
    if (this.buffered === 0) return;
    const now = performance.now();
    const tallies = [...this.closed, ...this.tallies.values()];
    const batch = tallies.filter((t) => t.kind === 'replay').map((t) => toEvent(t, now));
    const refusals = tallies.filter((t) => t.kind !== 'replay').map((t) => toRefusal(t, now));
    const replays = this.buffered;
    this.tallies = new Map();
    this.closed = [];
    this.buffered = 0;
    this.inFlight = replays;
    this.inFlightRecords = tallies.length;
    this.writing = Promise.all([
      batch.length > 0 && this.store.recordReplays(batch),
      refusals.length > 0 && this.store.recordRefusals?.(refusals),
    ])
      .then(() => undefined)
      .catch((err: Error) => {
        this.lost += replays;
        this.logger.warn(`Lost ${replays} replay audit events: ${err.message}`);
      })
      .finally(() => {
        this.inFlight = 0;
        this.inFlightRecords = 0;
        this.writing = undefined;
      });
    await this.writing;
  }

  /** Once per interval: start a write unless one is still running, and report drops. */
  private tick(): void {
    this.reportDropped();
    if (!this.writing) void this.flush();
  }

  private reportDropped(): void {
    if (this.droppedUnreported === 0) return;
    this.logger.warn(
      `Dropped ${this.droppedUnreported} replay audit events: replays of ${this.options.replayAuditMaxBuffered} records were already waiting to be written (replayAuditMaxBuffered)`,
    );
    this.droppedUnreported = 0;
  }

  /** Before the DataSource closes (`onApplicationShutdown`), write what is left. */
  async beforeApplicationShutdown(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
    this.reportDropped();
  }
}
