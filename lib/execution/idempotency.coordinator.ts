import type { LoggerService } from '@nestjs/common';
import { ProblemCode } from '../idempotency.constants.js';
import type { ResolvedIdempotencyOptions } from '../idempotency.defaults.js';
import type { IdempotentRoute } from './idempotent-route.resolver.js';
import type {
  ClaimOutcome,
  IdempotencyScope,
  IdempotencyStore,
  IdempotencyTransaction,
  PeekOutcome,
  StoredResponse,
  TransactionalClaimOutcome,
} from '../interfaces/idempotency-store.interface.js';
import { claimInTransaction, openTransaction } from './transactional-routes.check.js';
import { IdempotentExecution } from './idempotent.execution.js';
import type { ReplayAuditService } from './replay-audit.service.js';
import { ReplayCache } from './replay-cache.js';
import { type InFlightRuns, inFlightRuns } from './in-flight-runs.js';
import { telemetry } from '../telemetry/idempotency.telemetry.js';

/** One request to decide on: what it is for, and what it is. */
export interface IdempotentAttempt {
  scope: IdempotencyScope;
  /** SHA-256 hex of the request (see `fingerprintRequest`). */
  requestHash: string;
  route: IdempotentRoute;
  /**
   * A request that only replays (HEAD on a GET route): with a store that can `peek`, read and
   * never claim; nothing to replay is rejected with `NothingToReplay`.
   */
  replayOnly?: boolean;
}

/** Why a request is refused without running; the transport says it in its own terms. */
export type RejectCode =
  | typeof ProblemCode.InProgress
  | typeof ProblemCode.Mismatch
  | typeof ProblemCode.StoreUnavailable
  | typeof ProblemCode.NothingToReplay;

/** A completed record's response to answer with; `answered()` it once it reached the caller. */
export interface Replay {
  response: StoredResponse;
  recordId: string;
  expiresAt: Date;
}

/** What to do with a request; no transport types, so HTTP, GraphQL and RPC share it. */
export type IdempotencyDecision =
  | ({ type: 'replay' } & Replay)
  | { type: 'reject'; code: RejectCode }
  | { type: 'execute'; execution: IdempotentExecution };

/**
 * The request logic of idempotency, apart from any transport: replay cache, then claim, then
 * replay, reject or execute under the claim. A store that cannot answer rejects (fail closed):
 * a handler never runs unprotected.
 */
export class IdempotencyCoordinator {
  /** This store's runs in flight, which a graceful shutdown waits for. */
  private readonly inFlight: InFlightRuns;

  constructor(
    private readonly options: ResolvedIdempotencyOptions,
    private readonly store: IdempotencyStore,
    private readonly audit: Pick<ReplayAuditService, 'record'>,
    private readonly cache: ReplayCache,
    private readonly logger: LoggerService,
  ) {
    this.inFlight = inFlightRuns(store);
  }

  /**
   * The replay cache alone, synchronously: a transport can answer a hot replay without a
   * promise; `undefined` when `decide` must run.
   */
  cachedReplay(scope: IdempotencyScope, requestHash: string): Replay | undefined {
    const cacheKey = ReplayCache.scopeKey(scope.userId, scope.endpoint, scope.key);
    const cached = this.cache.get(cacheKey, requestHash);
    if (!cached) return undefined;
    telemetry.replayFromCache(scope.endpoint);
    // Not the entry itself: it links to other scopes' entries, and a replay is held until sent.
    const { response, recordId, expiresAt } = cached;
    return { response, recordId, expiresAt };
  }

  /**
   * Audits a replay once the caller got it (a replay that never arrived deduplicated nothing
   * finance can see), or a response that could not be replayed as such (not a deduplication).
   */
  answered({ response, recordId, expiresAt }: Replay): void {
    this.audit.record(recordId, expiresAt, response.body === null ? 'not_replayable' : 'replay');
  }

  /** A transaction outside any claim: a transactional route called without a key. */
  plainTransaction(): IdempotencyTransaction {
    return openTransaction(this.store, { id: '', token: '' }, async () => undefined);
  }

  async decide(attempt: IdempotentAttempt): Promise<IdempotencyDecision> {
    const { scope, requestHash, route } = attempt;
    const cacheKey = ReplayCache.scopeKey(scope.userId, scope.endpoint, scope.key);
    const cached = this.cache.get(cacheKey, requestHash);
    if (cached) {
      telemetry.replayFromCache(scope.endpoint);
      const { response, recordId, expiresAt } = cached;
      return { type: 'replay', response, recordId, expiresAt };
    }
    let outcome: ClaimOutcome | TransactionalClaimOutcome | PeekOutcome;
    // A claim only to release it would refuse a first GET sent at the same time (false 409).
    const peek = attempt.replayOnly ? this.store.peek?.bind(this.store) : undefined;
    try {
      const request = {
        key: scope.key,
        endpoint: scope.endpoint,
        userId: scope.userId,
        requestHash,
        ttlSeconds: route.ttlSeconds,
        leaseSeconds: this.options.leaseSeconds,
      };
      // Counted from before it is sent: a claim that commits after the shutdown looked runs.
      this.inFlight.writes++;
      outcome = await (peek?.(scope, requestHash) ??
        telemetry.claim(scope, () =>
          route.transactional === 'single'
            ? claimInTransaction(this.store, request)
            : this.store.claim(request),
        ));
    } catch (err) {
      this.logger.error(
        `Idempotency store unavailable; refusing ${scope.endpoint}: ${(err as Error).message}`,
      );
      return { type: 'reject', code: ProblemCode.StoreUnavailable };
    } finally {
      // A claimed run is counted in `runs` by its execution, created below without a pause.
      this.inFlight.writes--;
    }
    switch (outcome.type) {
      case 'absent':
        return { type: 'reject', code: ProblemCode.NothingToReplay };
      case 'in_progress':
      case 'mismatch': {
        // Without a committed record (single-commit), kept as long as such a record would be.
        const expiresAt = outcome.expiresAt ?? new Date(Date.now() + route.ttlSeconds * 1000);
        this.audit.record(outcome.recordId ?? '', expiresAt, outcome.type);
        const code = outcome.type === 'mismatch' ? ProblemCode.Mismatch : ProblemCode.InProgress;
        return { type: 'reject', code };
      }
      case 'completed': {
        // The entry's life is the record's, as the database counts it.
        const { response, recordId, expiresAt } = outcome;
        this.cache.set(
          cacheKey,
          { requestHash, recordId, expiresAt, response },
          outcome.secondsLeft,
        );
        return { type: 'replay', response, recordId, expiresAt };
      }
      case 'claimed': {
        const { lease } = outcome;
        const transaction =
          'transaction' in outcome ? (outcome.transaction as IdempotencyTransaction) : undefined;
        const execution = new IdempotentExecution(
          this.options,
          this.store,
          this.logger,
          route,
          scope,
          lease,
          (response, record) =>
            this.cache.set(
              cacheKey,
              { requestHash, recordId: lease.id, expiresAt: record.expiresAt, response },
              record.secondsLeft,
            ),
          transaction,
        );
        return { type: 'execute', execution };
      }
    }
  }
}
