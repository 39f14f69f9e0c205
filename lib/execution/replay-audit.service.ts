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
import type { IdempotencyStore, ReplayEvent } from '../store/idempotency-store.interface.js';

/** Buffered replays are written at once past this many, without waiting for the timer. */
const EAGER_FLUSH_AT = 1_000;

/** What the audit holds and has given up on, for monitoring. */
export interface ReplayAuditCounts {
  /** Events buffered or in the batch being written; never more than `replayAuditMaxBuffered`. */
  pending: number;
  /** Events dropped because `replayAuditMaxBuffered` were pending, since start. */
  dropped: number;
  /** Events whose write failed (database error or timeout), since start. */
  lost: number;
}

/**
 * Records replays for the audit trail without a write per replay: events are buffered and
 * written in one statement per flush, off the request path. One write at a time, and a bounded
 * buffer: a database that hangs costs audit events, never memory.
 */
@Injectable()
export class ReplayAuditService implements OnModuleInit, BeforeApplicationShutdown {
  private readonly logger = new Logger('IdempotencyReplayAudit');
  private buffer: ReplayEvent[] = [];
  private timer?: NodeJS.Timeout;
  private writing?: Promise<void>;
  private inFlight = 0;
  private dropped = 0;
  private droppedUnreported = 0;
  private lost = 0;

  constructor(
    @Inject(IDEMPOTENCY_RESOLVED_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    @Inject(IDEMPOTENCY_STORE) private readonly store: IdempotencyStore,
  ) {}

  onModuleInit(): void {
    if (this.options.replayAudit === 'off') return;
    this.timer = setInterval(() => this.tick(), this.options.replayAuditFlushMs);
    this.timer.unref();
  }

  get counts(): ReplayAuditCounts {
    return { pending: this.buffer.length + this.inFlight, dropped: this.dropped, lost: this.lost };
  }

  record(recordId: string, expiresAt: Date): void {
    if (this.options.replayAudit === 'off') return;
    if (this.buffer.length + this.inFlight >= this.options.replayAuditMaxBuffered) {
      this.dropped++;
      this.droppedUnreported++;
      return;
    }
    this.buffer.push({ recordId, expiresAt, replayedAt: new Date() });
    if (this.buffer.length >= EAGER_FLUSH_AT && !this.writing) void this.flush();
  }

  /** Writes what is buffered; resolves when it is in the database (or logged as lost). */
  async flush(): Promise<void> {
    while (this.writing) await this.writing;
    if (this.buffer.length === 0) return;
    const batch = this.buffer;
    this.buffer = [];
    this.inFlight = batch.length;
    this.writing = this.store
      .recordReplays(batch)
      .catch((err: Error) => {
        this.lost += batch.length;
        this.logger.warn(`Lost ${batch.length} replay audit events: ${err.message}`);
      })
      .finally(() => {
        this.inFlight = 0;
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
      `Dropped ${this.droppedUnreported} replay audit events: ${this.options.replayAuditMaxBuffered} were already waiting to be written (replayAuditMaxBuffered)`,
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
