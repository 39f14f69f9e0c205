import type { LoggerService } from '@nestjs/common';
import { COMPLETION_RETRY } from '../idempotency.defaults.js';
import type {
  CompletedRecord,
  Completion,
  IdempotencyStore,
  Lease,
} from '../interfaces/idempotency-store.interface.js';

/** The background retries still running, per store: stopped when its module is destroyed. */
const running = new WeakMap<IdempotencyStore, Set<CompletionRetry>>();

export interface CompletionRetryContext {
  store: IdempotencyStore;
  lease: Lease;
  leaseSeconds: number;
  logger: LoggerService;
  describe: () => string;
}

/**
 * What to write once the full completion was refused, in order: the bytes alone (no derived
 * copy, no transaction id), then only that the handler ran, with its status (`unrecorded`).
 */
export function fallbackCompletions(c: Completion): Completion[] {
  const statusOnly: Completion = {
    statusCode: c.statusCode,
    headers: {},
    body: null,
    bodyDigest: null,
    omitted: c.body === null && !c.bodyDigest ? (c.omitted ?? 'unrecorded') : 'unrecorded',
    transactionId: null,
    ttlSeconds: c.ttlSeconds,
    bytesOnly: true,
  };
  if (c.body === null && !c.bodyDigest) return [statusOnly];
  return [{ ...c, bytesOnly: true, transactionId: null }, statusOnly];
}

type Written = { record: CompletedRecord | null } | { failure: Error; refused: boolean };

/** SQLSTATE classes of a failure that says nothing about the write itself: try it again. */
const TRANSIENT_CLASSES = new Set(['08', '25', '40', '53', '55', '57', '58']);

/**
 * PostgreSQL answered and refused this write (a trigger, a constraint, a size limit): the next,
 * smaller fallback may pass. A lost connection, a deadline, a terminated backend or a read-only
 * server refused nothing: the same write is retried rather than traded for a smaller one.
 */
export function refusedByDatabase(err: unknown): boolean {
  const e = err as { severity?: unknown; code?: unknown } | null;
  if (typeof e?.severity !== 'string') return false;
  return typeof e.code !== 'string' || !TRANSIENT_CLASSES.has(e.code.slice(0, 2));
}

/**
 * The first of `completions` the store takes. A fallback is tried only when the one before it
 * was refused by the database, or when `fallBack` says the writes failed too often to wait.
 */
async function writeFirst(
  ctx: CompletionRetryContext,
  completions: Completion[],
  fallBack = false,
): Promise<Written> {
  let failure = new Error('nothing to write');
  let refused = false;
  for (const completion of completions) {
    try {
      return { record: await ctx.store.complete(ctx.lease, completion) };
    } catch (err) {
      failure = err as Error;
      refused = refusedByDatabase(err);
      if (!refused && !fallBack) break;
    }
  }
  return { failure, refused };
}

/**
 * The handler ran and its completion write failed: a retry must never run it again, so the key
 * is never freed. Tries the first fallback now (the caller waits: one more statement deadline at
 * most); if it is not written, keeps the lease renewed and retries them all in the background
 * with backoff for as long as the process lives (until its module is destroyed). Resolves with
 * the immediate attempt: the record, or null (lost, or still retrying).
 */
export async function completeUntilStored(
  ctx: CompletionRetryContext,
  completions: Completion[],
): Promise<CompletedRecord | null> {
  const first = await writeFirst(ctx, completions.slice(0, 1));
  if (!('failure' in first)) return first.record;
  ctx.logger.error?.(
    `${ctx.describe()} stays in progress while its completion is retried in the background: ${first.failure.message}`,
  );
  const retries = running.get(ctx.store) ?? new Set();
  running.set(ctx.store, retries);
  new CompletionRetry(ctx, completions, retries).schedule();
  return null;
}

class CompletionRetry {
  private timer?: NodeJS.Timeout;
  private attempt: Promise<void> = Promise.resolve();
  private delayMs = COMPLETION_RETRY.firstDelayMs;
  private stopped = false;
  /** Attempts in a row that failed without the database refusing them (the immediate one included). */
  private unanswered = 1;

  constructor(
    private readonly ctx: CompletionRetryContext,
    private readonly completions: Completion[],
    private readonly retries: Set<CompletionRetry>,
  ) {
    retries.add(this);
  }

  schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => (this.attempt = this.tick()), this.delayMs);
    this.timer.unref();
    const renewEveryMs = (this.ctx.leaseSeconds * 1000) / 3;
    this.delayMs = Math.min(this.delayMs * 2, COMPLETION_RETRY.maxDelayMs, renewEveryMs);
  }

  /** The process is shutting down with the completion still unwritten: say what that means. */
  abandon(): Promise<void> {
    this.ctx.logger.error?.(
      `Shutting down before the completion of ${this.ctx.describe()} was written: the key frees when its lease ends, and a retry may then run the operation again`,
    );
    return this.stop();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.retries.delete(this);
    await this.attempt;
  }

  private async tick(): Promise<void> {
    const { store, lease, leaseSeconds, logger, describe } = this.ctx;
    const fallBack = this.unanswered >= COMPLETION_RETRY.fallBackAfterUnanswered;
    const written = await writeFirst(this.ctx, this.completions, fallBack);
    if (this.stopped) return;
    if (!('failure' in written)) {
      if (written.record) logger.log?.(`${describe()}: completion written after retrying`);
      else logger.error?.(`Lost the claim of ${describe()} while retrying its completion`);
      void this.stop();
      return;
    }
    this.unanswered = written.refused ? 0 : this.unanswered + 1;
    // Keeps the claim held meanwhile, however long the store refuses the completion.
    const held = await store.renew(lease, leaseSeconds).catch(() => true);
    if (!held) {
      logger.error?.(`Lost the claim of ${describe()} while retrying its completion`);
      void this.stop();
      return;
    }
    this.schedule();
  }
}

/** Background completion retries of `store` still running. */
export function retriesRunning(store: IdempotencyStore): number {
  return running.get(store)?.size ?? 0;
}

/** Stops the background completion retries of `store`, saying what each one left. */
export async function abandonRetries(store: IdempotencyStore): Promise<void> {
  const retries = running.get(store);
  if (retries) await Promise.all([...retries].map((retry) => retry.abandon()));
}
