import type { LoggerService } from '@nestjs/common';
import { ProblemCode } from '../idempotency.constants.js';
import type { ResolvedIdempotencyOptions } from '../idempotency.defaults.js';
import type { IdempotentRoute } from '../http/idempotent-route.resolver.js';
import type {
  ClaimOutcome,
  IdempotencyScope,
  IdempotencyStore,
  IdempotencyTransaction,
  StoredResponse,
  TransactionalClaimOutcome,
} from '../store/idempotency-store.interface.js';
import { claimInTransaction } from '../store/transactional-routes.check.js';
import { IdempotentExecution } from './idempotent.execution.js';
import type { ReplayAuditService } from './replay-audit.service.js';
import { ReplayCache } from './replay-cache.js';
import { telemetry } from '../telemetry/idempotency.telemetry.js';

/** One request to decide on: what it is for, and what it is. */
export interface IdempotentAttempt {
  scope: IdempotencyScope;
  /** SHA-256 hex of the request (see `fingerprintRequest`). */
  requestHash: string;
  route: IdempotentRoute;
}

/** Why a request is refused without running; the transport says it in its own terms. */
export type RejectCode =
  typeof ProblemCode.InProgress | typeof ProblemCode.Mismatch | typeof ProblemCode.StoreUnavailable;

/** What to do with a request; no transport types, so HTTP, GraphQL and RPC share it. */
export type IdempotencyDecision =
  | { type: 'replay'; response: StoredResponse }
  | { type: 'reject'; code: RejectCode }
  | { type: 'execute'; execution: IdempotentExecution };

/**
 * The request logic of idempotency, apart from any transport: replay cache, then claim, then
 * replay, reject or execute under the claim. A store that cannot answer rejects (fail closed):
 * a handler never runs unprotected.
 */
export class IdempotencyCoordinator {
  constructor(
    private readonly options: ResolvedIdempotencyOptions,
    private readonly store: IdempotencyStore,
    private readonly audit: Pick<ReplayAuditService, 'record'>,
    private readonly cache: ReplayCache,
    private readonly logger: LoggerService,
  ) {}

  /**
   * The replay cache alone, synchronously: a transport can answer a hot replay without a
   * promise. Audited like any replay; `undefined` when `decide` must run.
   */
  cachedReplay(scope: IdempotencyScope, requestHash: string): StoredResponse | undefined {
    const cacheKey = ReplayCache.scopeKey(scope.userId, scope.endpoint, scope.key);
    const cached = this.cache.get(cacheKey, requestHash);
    if (!cached) return undefined;
    telemetry.replayFromCache(scope.endpoint);
    this.audit.record(cached.recordId, cached.expiresAt);
    return cached.response;
  }

  async decide({ scope, requestHash, route }: IdempotentAttempt): Promise<IdempotencyDecision> {
    const cached = this.cachedReplay(scope, requestHash);
    if (cached) return { type: 'replay', response: cached };
    const cacheKey = ReplayCache.scopeKey(scope.userId, scope.endpoint, scope.key);
    let outcome: ClaimOutcome | TransactionalClaimOutcome;
    try {
      const request = {
        ...scope,
        requestHash,
        ttlSeconds: route.ttlSeconds,
        leaseSeconds: this.options.leaseSeconds,
      };
      outcome = await telemetry.claim(scope, () =>
        route.transactional === 'single'
          ? claimInTransaction(this.store)(request)
          : this.store.claim(request),
      );
    } catch (err) {
      this.logger.error(
        `Idempotency store unavailable; refusing ${scope.endpoint}: ${(err as Error).message}`,
      );
      return { type: 'reject', code: ProblemCode.StoreUnavailable };
    }
    switch (outcome.type) {
      case 'in_progress':
        return { type: 'reject', code: ProblemCode.InProgress };
      case 'mismatch':
        return { type: 'reject', code: ProblemCode.Mismatch };
      case 'completed':
        this.audit.record(outcome.recordId, outcome.expiresAt);
        // The entry's life is the record's, as the database counts it.
        this.cache.set(cacheKey, { ...outcome, requestHash }, outcome.secondsLeft);
        return { type: 'replay', response: outcome.response };
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
