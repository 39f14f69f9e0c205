import { type CallHandler, HttpException, type LoggerService } from '@nestjs/common';
import { defer, type Observable } from 'rxjs';
import type { ResolvedIdempotencyOptions } from '../idempotency.defaults.js';
import {
  attachIdempotencyContext,
  checkTransactionId,
  IdempotencyContext,
} from '../decorators/idempotency-context.js';
import type { IdempotentRoute } from '../http/idempotent-route.resolver.js';
import type {
  CompletedRecord,
  IdempotencyScope,
  IdempotencyStore,
  IdempotencyTransaction,
  Lease,
  StoredResponse,
} from '../store/idempotency-store.interface.js';
import { trackSettlement } from './handler-settlement.js';
import { type Completing, completionOf, rolledBackResponse } from './outcome-completion.js';
import type { OutcomeCapture, WireResponse } from './handler-outcome.js';
import { LeaseHeartbeat } from './lease-heartbeat.js';
import { openTransaction } from '../store/transactional-routes.check.js';
import { telemetry } from '../telemetry/idempotency.telemetry.js';

/**
 * One handler run under a claimed key. The claim lasts until the handler has settled AND the
 * response has left: a response sent before the handler settled (a timeout interceptor's 408)
 * is never stored as the outcome; the outcome is recorded when the handler settles.
 */
export class IdempotentExecution {
  private readonly heartbeat: LeaseHeartbeat;
  private readonly context: IdempotencyContext<unknown>;
  private transaction?: IdempotencyTransaction;
  private handlerError: unknown = undefined;
  private settled = false;
  /** A response left (or the caller gave up) before the handler settled. */
  private early = false;
  /** The claim was completed or released: nothing is left to record. */
  private done = false;

  constructor(
    private readonly options: ResolvedIdempotencyOptions,
    private readonly store: IdempotencyStore,
    private readonly logger: LoggerService,
    private readonly route: IdempotentRoute,
    private readonly scope: IdempotencyScope,
    private readonly lease: Lease,
    /** Called once the response is durably stored (committed, in transactional mode). */
    private readonly onStored: (response: StoredResponse, record: CompletedRecord) => void,
    /** Single-commit mode: the transaction the claim was made in; it ends the claim too. */
    private readonly claimTransaction?: IdempotencyTransaction,
  ) {
    this.context = new IdempotencyContext(scope);
    this.transaction = claimTransaction;
    this.heartbeat = new LeaseHeartbeat(store, lease, options, logger, () => this.describe());
  }

  /** Cold: the handler runs on subscription. Never subscribed? Call `cancel()`. */
  run(req: object, next: CallHandler, capture: OutcomeCapture): Observable<unknown> {
    return defer(() => {
      if (this.claimTransaction) {
        this.context.manager = this.claimTransaction.manager;
      } else if (this.route.transactional) {
        this.transaction = openTransaction(this.store, this.lease, async (tx) => {
          if (await this.store.lockInTransaction?.(this.lease, tx)) {
            await this.heartbeat.halt();
          }
        });
        this.context.manager = this.transaction.manager;
      }
      attachIdempotencyContext(req, this.context);
      // A single-commit claim lives as long as its transaction: nothing to renew.
      if (!this.claimTransaction) this.heartbeat.start();
      const handled = trackSettlement(next.handle(), {
        settled: (error, errored) => this.handlerSettled(error, errored),
        detached: () => {
          if (this.done) return false;
          this.early = true;
          return true;
        },
      });
      return capture(handled, {
        onStream: () => this.streamed(),
        onEnd: (wire) => this.responded(req, wire),
        onFailure: () => this.failed(),
      });
    });
  }

  /** The caller went away before the handler started: free the key at once. */
  async cancel(): Promise<void> {
    this.done = true;
    await this.discard('the request was abandoned before its handler ran');
  }

  /** No response carries the handler's error (GraphQL, RPC): free the key for a retry. */
  private async failed(): Promise<void> {
    if (this.done) return;
    this.settle();
    await this.discard('its handler failed');
  }

  private async responded(req: object, wire: WireResponse): Promise<WireResponse | void> {
    // A handler that owns the response (`@Res()`) may send before it returns: that is its outcome.
    if (this.early || (!this.settled && !this.route.ownsResponse)) {
      this.early = true;
      this.logger.warn?.(
        `${this.describe()} answered ${wire.statusCode} before its handler finished; not stored, the key stays in progress until the handler settles`,
      );
      return;
    }
    this.settle();
    if (!this.stores(wire.statusCode, this.handlerError)) return this.discard('not stored');
    const outcome = completionOf(wire, this.route.storeResponse, this.options.maxResponseBytes);
    const { storable } = outcome;
    const completing = {
      ...outcome.completing,
      transactionId: this.transactionId(req, outcome.body),
    };
    const record = await this.record(completing);
    if (record === 'rolled-back') return this.rolledBack();
    if (record && storable) this.onStored(completing as StoredResponse, record);
  }

  private handlerSettled(error: unknown, errored: boolean): void {
    this.settled = true;
    if (errored) this.handlerError = error;
    if (!this.early || this.done) return;
    // The client already got another answer: record that the operation ran, without a body.
    const status = !errored
      ? this.route.successStatus
      : error instanceof HttpException
        ? error.getStatus()
        : 500;
    this.settle();
    if (!this.stores(status, this.handlerError)) {
      void this.discard(`its handler failed (${status}) after an early response`);
      return;
    }
    const completing = {
      statusCode: status,
      headers: {},
      body: null,
      bodyDigest: null,
    };
    void this.record({ ...completing, transactionId: this.context.transactionId }).then(
      async (record) => {
        if (record === 'rolled-back') await this.discard('its transaction rolled back');
      },
    );
  }

  /** A streamed response cannot be stored: commit the handler's writes before its first byte. */
  private async streamed(): Promise<WireResponse | void> {
    this.settle();
    try {
      await this.endTransaction(true);
    } catch (err) {
      return this.rolledBack(err as Error);
    }
    await this.release('the response is streamed and cannot be stored');
  }

  private settle(): void {
    this.done = true;
    this.heartbeat.stop();
  }

  private stores(status: number, error: unknown): boolean {
    return status !== 304 && this.options.storeIf(status, error);
  }

  private async discard(reason: string): Promise<void> {
    await this.endTransaction(false);
    await this.release(reason);
  }

  /** Completes the record (committing the handler's writes with it, in transactional mode). */
  private async record(c: Completing): Promise<CompletedRecord | null | 'rolled-back'> {
    const completion = { ...c, ttlSeconds: this.route.ttlSeconds };
    // Captured now: a failed COMMIT has already dropped the transaction when the catch runs.
    const transaction = this.transaction?.active ? this.transaction : undefined;
    try {
      const record = await telemetry.complete(this.lease, c.transactionId, () =>
        this.store.complete(this.lease, completion, transaction),
      );
      if (!record) this.logger.error?.(`Lost the claim of ${this.describe()} before completion`);
      if (transaction && !record) throw new Error('lease lost');
      await this.endTransaction(transaction !== undefined);
      return record;
    } catch (err) {
      telemetry.completionFailed();
      if (transaction) return 'rolled-back';
      this.logger.error?.(`Could not store the response of ${this.describe()}: ${err}`);
      // Whatever the store refused, the bytes are what a retry needs: store them alone.
      if (c.body === null && c.transactionId === null) return null;
      telemetry.completionRetried();
      return this.store
        .complete(this.lease, { ...completion, bytesOnly: true, transactionId: null })
        .catch((again: Error) => {
          // The claim stays in progress: deleting it would let a retry run the operation again.
          this.logger.error?.(
            `${this.describe()} stays in progress until its lease ends: ${again.message}`,
          );
          return null;
        });
    }
  }

  /** Transactional mode, outcome not recorded: nothing was committed, so say so and free the key. */
  private async rolledBack(err?: Error): Promise<WireResponse> {
    this.logger.error?.(`Rolled back ${this.describe()}${err ? `: ${err.message}` : ''}`);
    await this.discard('its transaction rolled back');
    return rolledBackResponse(this.options.retryAfterSeconds);
  }

  private transactionId(req: object, body: unknown): string | null {
    if (this.context.transactionId !== null) return this.context.transactionId;
    if (!this.route.transactionId) return null;
    let derived: unknown;
    try {
      derived = this.route.transactionId(body, req);
    } catch {
      return null;
    }
    if (derived === undefined || derived === null) return null;
    const id = checkTransactionId(derived);
    if (id === null) {
      this.logger.error?.(`${this.describe()}: transactionId() gave an unusable id; stored none`);
    }
    return id;
  }

  /** A failed commit throws; a failed rollback does not (a dead connection rolls back anyway). */
  private async endTransaction(commit: boolean): Promise<void> {
    const tx = this.transaction;
    if (!tx) return;
    this.transaction = undefined;
    if (commit) await tx.commit();
    else await tx.rollback().catch(() => undefined);
  }

  private async release(reason: string): Promise<void> {
    // Single-commit: the claim was never committed; ending the transaction freed it.
    if (this.claimTransaction) return;
    try {
      await this.store.release(this.lease);
    } catch (err) {
      this.logger.warn?.(
        `Could not release ${this.describe()} (${reason}); it frees when its lease ends: ${(err as Error).message}`,
      );
    }
  }

  private describe(): string {
    return `key ${JSON.stringify(this.scope.key)} on ${this.scope.endpoint}`;
  }
}
