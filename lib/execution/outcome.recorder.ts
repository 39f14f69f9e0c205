import type { LoggerService } from '@nestjs/common';
import type { ResolvedIdempotencyOptions } from '../idempotency.defaults.js';
import type {
  CompletedRecord,
  IdempotencyStore,
  IdempotencyTransaction,
  Lease,
} from '../interfaces/idempotency-store.interface.js';
import { TransactionAbortedError } from '../store/transaction-aborted.error.js';
import { telemetry } from '../telemetry/idempotency.telemetry.js';
import { commitOutcomeUnknown } from './commit-outcome.js';
import { completeUntilStored, fallbackCompletions, refusedByDatabase } from './completion-retry.js';
import type { UncapturableReason, WireResponse } from './handler-outcome.js';
import { derivedTransactionId, type IdempotencyContext } from './idempotency-context.js';
import type { IdempotentRoute } from './idempotent-route.resolver.js';
import type { InFlightRuns } from './in-flight-runs.js';
import {
  type Completing,
  rolledBackResponse,
  unknownOutcomeResponse,
} from './outcome-completion.js';

/** What `record` gives: the stored record, none (claim lost), or why nothing was committed. */
export type Recorded = CompletedRecord | null | 'rolled-back' | 'unknown';

/**
 * Writes what became of one run: completes its record (committing a transactional handler's
 * writes with it) or frees its key. `IdempotentExecution` decides which; this owns the store.
 */
export class OutcomeRecorder {
  /** The run's open transaction (transactional or single-commit), until it is ended. */
  transaction?: IdempotencyTransaction;
  /** Single-commit: the store ended the transaction on its own; nothing of it was committed. */
  abortedBy?: Error;

  constructor(
    private readonly options: ResolvedIdempotencyOptions,
    private readonly store: IdempotencyStore,
    private readonly logger: LoggerService,
    private readonly route: IdempotentRoute,
    private readonly lease: Lease,
    private readonly context: IdempotencyContext<unknown>,
    private readonly inFlight: InFlightRuns,
    private readonly describe: () => string,
    /** Single-commit mode: the transaction the claim was made in; it ends the claim too. */
    private readonly claimTransaction?: IdempotencyTransaction,
  ) {
    this.transaction = claimTransaction;
  }

  /** Records that the handler ran, with its status and no body (rule (b), docs/behaviour-and-states.md). */
  async completeAnyway(status: number, reason?: UncapturableReason): Promise<WireResponse | void> {
    const record = await this.record({
      statusCode: status,
      headers: {},
      body: null,
      bodyDigest: null,
      omitted: reason,
      transactionId: this.context.transactionId,
    });
    if (record === 'rolled-back' || record === 'unknown') return this.rolledBack(record);
  }

  /** Completes the record (committing the handler's writes with it, in transactional mode). */
  async record(c: Completing): Promise<Recorded> {
    const completion = { ...c, ttlSeconds: this.route.ttlSeconds };
    // Captured now: a failed COMMIT has already dropped the transaction when the catch runs.
    const transaction = this.transaction?.active ? this.transaction : undefined;
    // Single-commit: the completion is sent with the COMMIT.
    let committing = transaction !== undefined && transaction === this.claimTransaction;
    // A write until its COMMIT ended too (transactional): a graceful shutdown waits for it.
    this.inFlight.writes++;
    try {
      const record = await telemetry.complete(this.lease, c.transactionId, () =>
        this.store.complete(this.lease, completion, transaction),
      );
      if (!record) this.logger.error?.(`Lost the claim of ${this.describe()} before completion`);
      if (transaction && !record) throw new Error('lease lost');
      committing = transaction !== undefined;
      await this.endTransaction(committing);
      return record;
    } catch (err) {
      telemetry.completionFailed();
      if (transaction) {
        const outcome = committing && commitOutcomeUnknown(err) ? 'unknown' : 'rolled-back';
        this.logger.error?.(
          `${this.describe()} not committed (${outcome}): ${(err as Error).message}`,
        );
        return outcome;
      }
      this.logger.error?.(`Could not store the response of ${this.describe()}: ${err}`);
      // Refused by the database: the bytes are what a retry needs, stored alone, else the status
      // alone. Not answered (a lost connection, a failover): the same write first, so the record
      // keeps its transaction id. Never delete the claim: a retry would run the operation again.
      const { store, lease, logger, describe } = this;
      const retry = { store, lease, logger, describe, leaseSeconds: this.options.leaseSeconds };
      const fallbacks = fallbackCompletions(completion);
      telemetry.completionRetried();
      return completeUntilStored(
        retry,
        refusedByDatabase(err) ? fallbacks : [completion, ...fallbacks],
      );
    } finally {
      this.inFlight.writes--;
    }
  }

  /**
   * Transactional mode, outcome not recorded: free the key and say what is known. Rolled back
   * (PostgreSQL answered with an error, or the store aborted the transaction): nothing was
   * committed. Unknown (the COMMIT got no answer): the same key replays or runs it.
   */
  async rolledBack(
    cause: 'rolled-back' | 'unknown' | Error = 'rolled-back',
  ): Promise<WireResponse> {
    const err = cause instanceof Error ? cause : this.abortedBy;
    this.logger.error?.(`Rolled back ${this.describe()}${err ? `: ${err.message}` : ''}`);
    await this.discard('its transaction did not commit');
    if (cause === 'unknown' && !err) return unknownOutcomeResponse(this.options.retryAfterSeconds);
    const detail = err instanceof TransactionAbortedError ? err.detail : undefined;
    return rolledBackResponse(this.options.retryAfterSeconds, detail);
  }

  /** Rolls back what the run wrote, then frees its key for a fresh run. */
  async discard(reason: string): Promise<void> {
    await this.endTransaction(false);
    await this.release(reason);
  }

  transactionId(req: object, body: () => unknown): string | null {
    if (this.context.transactionId !== null) return this.context.transactionId;
    return derivedTransactionId(this.route.transactionId, req, body, () =>
      this.logger.error?.(`${this.describe()}: transactionId() gave an unusable id; stored none`),
    );
  }

  /**
   * A failed commit throws; a failed rollback does not (a dead connection rolls back anyway). Not
   * async: a single-commit run, committed with its record, has an ended promise to give.
   */
  private endTransaction(commit: boolean): Promise<void> | undefined {
    const tx = this.transaction;
    if (!tx) return undefined;
    this.transaction = undefined;
    return commit ? tx.commit() : tx.rollback().catch(() => undefined);
  }

  private async release(reason: string): Promise<void> {
    // Single-commit: the claim was never committed; ending the transaction freed it.
    if (this.claimTransaction) return;
    this.inFlight.writes++;
    try {
      await this.store.release(this.lease);
    } catch (err) {
      this.logger.warn?.(
        `Could not release ${this.describe()} (${reason}); it frees when its lease ends: ${(err as Error).message}`,
      );
    } finally {
      this.inFlight.writes--;
    }
  }
}
