import {
  Inject,
  Injectable,
  Logger,
  type BeforeApplicationShutdown,
  type OnModuleInit,
} from '@nestjs/common';
import { IDEMPOTENCY_RESOLVED_OPTIONS, IDEMPOTENCY_STORE } from './idempotency.constants.js';
import type { ResolvedIdempotencyOptions } from './idempotency.defaults.js';
import type { IdempotencyStore, ReplayEvent } from './interfaces/idempotency-store.interface.js';

/** Buffered replays are written at once past this many, without waiting for the timer. */
const MAX_BUFFERED = 1_000;

/**
 * Records replays for the audit trail without a write per replay: events are buffered and
 * written in one statement per flush, off the request path.
 */
@Injectable()
export class ReplayAuditService implements OnModuleInit, BeforeApplicationShutdown {
  private readonly logger = new Logger('IdempotencyReplayAudit');
  private buffer: ReplayEvent[] = [];
  private timer?: NodeJS.Timeout;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    @Inject(IDEMPOTENCY_RESOLVED_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    @Inject(IDEMPOTENCY_STORE) private readonly store: IdempotencyStore,
  ) {}

  onModuleInit(): void {
    if (this.options.replayAudit === 'off') return;
    this.timer = setInterval(() => void this.flush(), this.options.replayAuditFlushMs);
    this.timer.unref();
  }

  record(recordId: string, expiresAt: Date): void {
    if (this.options.replayAudit === 'off') return;
    this.buffer.push({ recordId, expiresAt, replayedAt: new Date() });
    if (this.buffer.length >= MAX_BUFFERED) void this.flush();
  }

  /** Writes what is buffered; resolves when it is in the database (or logged as lost). */
  flush(): Promise<void> {
    const batch = this.buffer;
    if (batch.length === 0) return this.flushing;
    this.buffer = [];
    this.flushing = this.flushing.then(() =>
      this.store.recordReplays(batch).catch((err: Error) => {
        this.logger.warn(`Lost ${batch.length} replay audit events: ${err.message}`);
      }),
    );
    return this.flushing;
  }

  /** Before the DataSource closes (`onApplicationShutdown`), write what is left. */
  async beforeApplicationShutdown(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}
