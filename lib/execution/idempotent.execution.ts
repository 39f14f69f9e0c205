import { type CallHandler, HttpException, type LoggerService } from '@nestjs/common';
import { defer, type Observable } from 'rxjs';
import { abortableRun } from './abortable-run.js';
import type { ResolvedIdempotencyOptions } from '../idempotency.defaults.js';
import { attachIdempotencyContext, IdempotencyContext } from './idempotency-context.js';
import type { IdempotentRoute } from './idempotent-route.resolver.js';
import type {
  CompletedRecord,
  IdempotencyScope,
  IdempotencyStore,
  IdempotencyTransaction,
  Lease,
  StoredResponse,
} from '../interfaces/idempotency-store.interface.js';
import { trackSettlement } from './handler-settlement.js';
import { completionOf, rolledBackResponse } from './outcome-completion.js';
import type { OutcomeCapture, UncapturableReason, WireResponse } from './handler-outcome.js';
import { isRecoveryPointFailure } from '../recovery/recovery-point.error.js';
import { LeaseHeartbeat } from './lease-heartbeat.js';
import { type InFlightRuns, inFlightRuns } from './in-flight-runs.js';
import { openTransaction } from './transactional-routes.check.js';
import { transactionAborted } from '../store/transaction-aborted.error.js';
import { RecoveryPoints } from '../recovery/recovery-points.js';
import { OutcomeRecorder } from './outcome.recorder.js';
import { UnansweredWatch } from './unanswered.watch.js';

/** What the transport tells a run about its caller. */
export interface RunCaller {
  /** The transport sends each value as it comes (RPC), not one answer. */
  streams?: boolean;
  /** Whether the caller is gone (HTTP: its socket closed); nothing is written to it then. */
  gone?: () => boolean;
  /**
   * Called once the run is concluded (its outcome decided, maybe not yet written): what the
   * caller keeps of it can go.
   */
  ended?: () => void;
}

/**
 * One handler run under a claimed key. The claim lasts until the handler has settled AND the
 * response has left: a response sent before the handler settled (a timeout interceptor's 408)
 * is never stored as the outcome; the outcome is recorded when the handler settles.
 */
export class IdempotentExecution {
  private readonly heartbeat: LeaseHeartbeat;
  private readonly context: IdempotencyContext<unknown>;
  private readonly recorder: OutcomeRecorder;
  private handlerError: unknown = undefined;
  /** The handler (or a pipe or interceptor inside it) threw: only then may its key be freed. */
  private threw = false;
  private settled = false;
  /** A response left (or the caller gave up) before the handler settled. */
  private early = false;
  /** The claim was completed or released: nothing is left to record. */
  private done = false;
  /** Counted until `done`, and in `writes` while its outcome is written: a shutdown waits for it. */
  private readonly inFlight: InFlightRuns;
  /** The same call came again while this run held it: the response is that call's refusal. */
  private overlap = false;
  /** The transport sends each value as it comes (RPC), not one answer. */
  private streams = false;
  private callerGone?: () => boolean;
  private callerEnded?: () => void;
  /** The last value the handler emitted (a web `Response` carries the status it chose). */
  private returned: unknown;
  /** Made once its handler returned with nothing written yet; none for most other runs. */
  private watch?: UnansweredWatch;

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
    this.context.bindRecoveryPoints(
      new RecoveryPoints(store, lease, scope, options.derivedKeySecret, !!route.transactional),
    );
    this.inFlight = inFlightRuns(store);
    this.recorder = new OutcomeRecorder(
      options,
      store,
      logger,
      route,
      lease,
      this.context,
      this.inFlight,
      () => this.describe(),
      claimTransaction,
    );
    this.heartbeat = new LeaseHeartbeat(store, lease, options, logger, () => this.describe());
    this.inFlight.runs++;
  }

  /**
   * Cold: the handler runs on subscription. Never subscribed? Call `cancel()`. Where the transport
   * `streams` each value to its caller (RPC), a handler that emitted values and then failed acted.
   */
  run(
    req: object,
    next: CallHandler,
    capture: OutcomeCapture,
    caller: RunCaller = {},
  ): Observable<unknown> {
    this.streams = caller.streams ?? false;
    this.callerGone = caller.gone;
    this.callerEnded = caller.ended;
    return defer(() => {
      if (this.claimTransaction) {
        this.context.manager = this.claimTransaction.manager;
      } else if (this.route.transactional) {
        const transaction = openTransaction(this.store, this.lease, async (tx) => {
          if (!this.store.lockInTransaction) return;
          // Halted first: a renewal sent after the lock would wait on it until its deadline.
          await this.heartbeat.halt();
          const locked = await this.store.lockInTransaction(this.lease, tx);
          if (!locked && !this.done) this.heartbeat.resume();
        });
        this.recorder.transaction = transaction;
        this.context.manager = transaction.manager;
      }
      attachIdempotencyContext(req, this.context);
      // A single-commit claim lives as long as its transaction: nothing to renew.
      if (!this.claimTransaction) this.heartbeat.start();
      const handled = trackSettlement(next.handle(), {
        settled: (error, errored, emitted, last) =>
          this.handlerSettled(error, errored, emitted, last),
        detached: () => {
          if (this.done) return false;
          this.early = true;
          return true;
        },
      });
      const aborted = this.claimTransaction?.aborted;
      const abortable = abortableRun(
        handled,
        aborted,
        (reason) => (this.recorder.abortedBy = reason),
      );
      return capture(abortable, {
        onUncapturable: (status, reason) =>
          this.uncapturable(status, reason).catch((err) => this.unrecorded(status, err)),
        onEnd: (wire) =>
          this.responded(req, wire).catch((err) => this.unrecorded(wire.statusCode, err)),
        onFailure: () => this.failed(),
      });
    });
  }

  /**
   * The same call came back after this run's answer ended without a response (an app
   * interceptor's `retry()` after the handler threw, or after an outer interceptor failed): this
   * run is concluded so the call can claim again. A handler that threw frees its key; one that
   * returned is recorded as run, without a body. False when there is nothing to conclude (already
   * concluded, or the handler still runs: its claim holds the key until it settles).
   */
  async retried(): Promise<boolean> {
    if (this.done || !this.settled) return false;
    this.settle();
    if (isRecoveryPointFailure(this.handlerError)) this.keptForResume();
    else if (this.threw)
      await this.recorder.discard('its handler threw and the call was tried again');
    else await this.recorder.completeAnyway(this.route.successStatus, 'unrecorded');
    return true;
  }

  /**
   * The same request reached the interceptor again while this run held it (an app interceptor
   * that hedges or calls the route again) and was refused: the response that goes out is that
   * refusal, not this handler's outcome, which is recorded as run, without a body.
   */
  overlapped(): void {
    this.overlap = true;
  }

  /** The caller went away before the handler started: free the key at once. */
  async cancel(): Promise<void> {
    this.end();
    await this.recorder.discard('the request was abandoned before its handler ran');
  }

  /**
   * No response carries the handler's error (GraphQL, RPC): free the key for a retry. 'kept'
   * when a recovery point failed: the transport answers that the store is unavailable.
   */
  private async failed(): Promise<'kept' | void> {
    if (this.done) return;
    this.settle();
    if (isRecoveryPointFailure(this.handlerError)) {
      this.keptForResume();
      return 'kept';
    }
    await this.recorder.discard('its handler failed');
  }

  /**
   * A step that ran, or may have, could not be read or recorded: the key is neither freed nor
   * completed. Its claim lapses with its lease, and a retry then resumes it with its steps.
   */
  private keptForResume(): WireResponse {
    const err = this.handlerError as Error;
    this.logger.error?.(`${this.describe()} kept in progress until its lease ends: ${err.message}`);
    const wait = Math.max(1, Math.ceil(this.options.leaseSeconds));
    return rolledBackResponse(
      wait,
      `A step of the operation could not be read or recorded; retry with the same key after ${wait} seconds, when it resumes`,
    );
  }

  private async responded(req: object, wire: WireResponse): Promise<WireResponse | void> {
    // Written after the run was concluded without a body (`watchUnanswered`): nothing to record.
    if (this.done) return;
    if (this.recorder.abortedBy) {
      this.settle();
      return this.recorder.rolledBack(this.recorder.abortedBy);
    }
    // A handler that owns the response (`@Res()`) may send before it returns: that is its outcome.
    if (this.early || (!this.settled && !this.route.ownsResponse)) {
      this.early = true;
      this.logger.warn?.(
        `${this.describe()} answered ${wire.statusCode} before its handler finished; not stored, the key stays in progress until the handler settles`,
      );
      return;
    }
    this.settle();
    if (isRecoveryPointFailure(this.handlerError)) return this.keptForResume();
    // Its transaction failed under it (the claim lost at BEGIN): nothing committed, a 503.
    const aborted = this.threw ? transactionAborted(this.handlerError) : undefined;
    if (aborted) return this.recorder.rolledBack(aborted);
    if (this.overlap) {
      return this.threw
        ? this.recorder.discard('its handler threw while a second call was refused')
        : this.recorder.completeAnyway(this.route.successStatus, 'unrecorded');
    }
    if (wire.statusCode === 304) return this.notModified();
    if (!this.options.storeIf(wire.statusCode, this.handlerError))
      return this.notKept(wire.statusCode, 'not stored');
    const outcome = completionOf(wire, this.route.storeResponse, this.options.maxResponseBytes);
    const { storable } = outcome;
    const completing = {
      ...outcome.completing,
      transactionId: this.recorder.transactionId(req, outcome.body),
    };
    const record = await this.recorder.record(completing);
    if (record === 'rolled-back' || record === 'unknown') return this.recorder.rolledBack(record);
    if (record && storable) this.onStored(completing as StoredResponse, record);
  }

  /**
   * The handler ran and its response went out as a `304` without a body (Express's ETag
   * freshness, `@fastify/etag`, `@HttpCode(304)`): recorded as run (rule (b)), not released for
   * a second run unless `storeIf` says so about the 304, the status the client received.
   */
  private notModified(): Promise<WireResponse | void> {
    if (!this.options.storeIf(304, this.handlerError)) return this.notKept(304, 'not stored');
    return this.recorder.completeAnyway(304, 'conditional');
  }

  private handlerSettled(error: unknown, errored: boolean, emitted: boolean, last: unknown): void {
    this.settled = true;
    this.returned = last;
    // A stream whose values were sent and then failed acted (its caller had them): not a throw.
    const streamedThenFailed = errored && emitted && this.streams && !isRecoveryPointFailure(error);
    if (errored) {
      this.handlerError = error;
      this.threw = !streamedThenFailed;
    }
    if (!this.early || this.done) {
      if (!errored && !this.done && this.callerGone) this.awaitAnswer(this.callerGone);
      return;
    }
    if (streamedThenFailed) {
      void this.uncapturable(200, 'streamed').catch((err) => this.unrecorded(200, err));
      return;
    }
    // The client already got another answer: record that the operation ran, without a body.
    const status = !errored
      ? this.route.successStatus
      : error instanceof HttpException
        ? error.getStatus()
        : 500;
    this.settle();
    if (isRecoveryPointFailure(this.handlerError)) return void this.keptForResume();
    if (!this.options.storeIf(status, this.handlerError)) {
      void this.notKept(status, `its handler failed (${status}) after an early response`);
      return;
    }
    void this.recorder.completeAnyway(status);
  }

  /**
   * The handler ran but its outcome cannot be captured (a stream, an unencodable value): it is
   * recorded without a body, committing a transactional handler's writes before the caller
   * gets anything; the key is never freed for a second run.
   */
  private async uncapturable(
    status: number,
    reason: UncapturableReason,
  ): Promise<WireResponse | void> {
    if (this.done) return;
    this.settle();
    if (!this.options.storeIf(status, this.handlerError)) return this.notKept(status, 'not stored');
    this.logger.warn?.(`${this.describe()}: response ${reason}; stored its status only`);
    return this.recorder.completeAnyway(status, reason);
  }

  /**
   * `storeIf` did not keep the outcome. Only a handler that threw frees its key for a fresh run;
   * one that returned ran to its end (a charge made, a 5xx it chose to answer), so its record is
   * completed without a body (rule (b)) and a transactional handler's writes commit with it.
   */
  private notKept(status: number, reason: string): Promise<WireResponse | void> {
    if (this.threw) return this.recorder.discard(reason);
    this.logger.warn?.(
      `${this.describe()}: storeIf did not keep its ${status}, but the handler returned; completed without a body`,
    );
    return this.recorder.completeAnyway(status, 'not_kept');
  }

  /** Bookkeeping failed after the handler ran (an app's `storeIf` threw): still never a re-run. */
  private unrecorded(status: number, err: unknown): Promise<WireResponse | void> {
    this.settle();
    this.logger.error?.(`${this.describe()}: could not record its outcome: ${err}`);
    return this.recorder.completeAnyway(status, 'unrecorded');
  }

  /** Nothing written yet: `UnansweredWatch` says when a caller that left is given up on. */
  private awaitAnswer(callerGone: () => boolean): void {
    this.watch ??= new UnansweredWatch(
      this.options,
      this.route,
      this.inFlight,
      this.heartbeat,
      this.recorder,
      callerGone,
      () => this.callerLeft(),
    );
    this.watch.awaitAnswer();
  }

  /** Its caller left with nothing written (`UnansweredWatch`): recorded without a body. */
  private callerLeft(): void {
    // Single-commit, its transaction ended by the store: nothing of it was committed.
    if (this.recorder.abortedBy) {
      this.settle();
      void this.recorder.rolledBack(this.recorder.abortedBy).catch(() => undefined);
      return;
    }
    this.logger.warn?.(
      `${this.describe()}: its caller left; its handler returned, nothing was written`,
    );
    const returned = this.returned;
    const status =
      typeof Response === 'function' && returned instanceof Response
        ? returned.status
        : this.route.successStatus;
    void this.uncapturable(status, 'unrecorded').catch((err) => this.unrecorded(status, err));
  }

  private settle(): void {
    this.end();
    this.heartbeat.stop();
  }

  private end(): void {
    if (!this.done) {
      this.inFlight.runs--;
      this.callerEnded?.();
    }
    this.done = true;
    this.watch?.stop();
  }

  private describe(): string {
    return `key ${JSON.stringify(this.scope.key)} on ${this.scope.endpoint}`;
  }
}
