import type * as OTel from '@opentelemetry/api';
import type { ProblemCode } from '../idempotency.constants.js';
import type {
  ClaimOutcome,
  CleanupResult,
  IdempotencyScope,
  Lease,
} from '../interfaces/idempotency-store.interface.js';
import { api, instruments, tracer } from './idempotency.instruments.js';

export { loadTelemetryApi } from './idempotency.instruments.js';

/** The request's context at claim time, for the completion span that runs after the handler. */
const requestContexts = new WeakMap<Lease, OTel.Context>();

const nothingToRecord = () => undefined;

/** `idem_claim_1a2b3c4d` → `claim`; unnamed statements by their first keyword (`delete`). */
function statementLabel(name: string | undefined, text: string): string {
  if (name) return name.replace(/^idem_/, '').replace(/_[0-9a-f]{8}$/, '');
  return /^\s*(\w+)/.exec(text)?.[1]?.toLowerCase() ?? 'unknown';
}

async function inSpan<T>(
  name: string,
  parent: OTel.Context | undefined,
  attributes: OTel.Attributes,
  work: (span: OTel.Span | undefined) => Promise<T>,
): Promise<T> {
  const recording = tracer();
  if (!api || !recording) return work(undefined);
  const { SpanStatusCode, context } = api;
  const span = recording.startSpan(name, { attributes }, parent ?? context.active());
  try {
    return await work(span);
  } catch (err) {
    span.recordException(err as Error);
    span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
    throw err;
  } finally {
    span.end();
  }
}

/**
 * The few calls the library makes for metrics and traces (see idempotency.instruments.ts for
 * the instruments); each is a no-op without `@opentelemetry/api` or without an SDK.
 */
export const telemetry = {
  /** Span `idempotency.claim` around the store's claim, and the counters of its outcome. */
  claim<T extends ClaimOutcome>(scope: IdempotencyScope, work: () => Promise<T>): Promise<T> {
    // Nothing records: no span, no attributes, no extra promise around the claim.
    if (!tracer() && !instruments()) return work();
    const attributes = { 'idempotency.endpoint': scope.endpoint };
    return inSpan('idempotency.claim', undefined, attributes, async (span) => {
      let outcome: T;
      try {
        outcome = await work();
      } catch (err) {
        instruments()?.claims.add(1, { ...attributes, 'idempotency.outcome': 'error' });
        throw err;
      }
      const m = instruments();
      m?.claims.add(1, { ...attributes, 'idempotency.outcome': outcome.type });
      span?.setAttribute('idempotency.outcome', outcome.type);
      if (outcome.type === 'claimed') {
        m?.executions.add(1, attributes);
        span?.setAttribute('idempotency.record_id', outcome.lease.id);
        if (api) requestContexts.set(outcome.lease, api.context.active());
      } else if (outcome.type === 'completed') {
        m?.replays.add(1, { ...attributes, 'idempotency.replay.source': 'postgres' });
        span?.setAttribute('idempotency.record_id', outcome.recordId);
      } else if (outcome.type === 'in_progress') m?.inFlight.add(1, attributes);
      else m?.mismatches.add(1, attributes);
      return outcome;
    });
  },

  /** Span `idempotency.complete`, a child of the request the claim was made in. */
  complete<T>(lease: Lease, transactionId: string | null, work: () => Promise<T>): Promise<T> {
    if (!tracer()) return work();
    const attributes: OTel.Attributes = { 'idempotency.record_id': lease.id };
    if (transactionId !== null) attributes['idempotency.transaction_id'] = transactionId;
    return inSpan('idempotency.complete', requestContexts.get(lease), attributes, work);
  },

  replayFromCache(endpoint: string): void {
    const attributes = { 'idempotency.endpoint': endpoint, 'idempotency.replay.source': 'cache' };
    instruments()?.replays.add(1, attributes);
  },

  refused(code: ProblemCode, status: number): void {
    const m = instruments();
    m?.refusals.add(1, { 'idempotency.problem': code, 'http.response.status_code': status });
    if (status === 503) m?.unavailable.add(1, { 'idempotency.problem': code });
  },

  completionFailed: () => instruments()?.completionFailures.add(1),
  completionRetried: () => instruments()?.completionRetries.add(1),
  leaseTakenOver: () => instruments()?.takeovers.add(1),
  auditDropped: () => instruments()?.auditDrops.add(1),

  cleanupRan(result: CleanupResult): void {
    if (result.ran) instruments()?.cleanupDeleted.add(result.deleted);
    else instruments()?.cleanupSkipped.add(1);
  },

  /** Starts timing one statement; call what it returns when the statement has settled. */
  statement(config: { name?: string; text: string }): () => void {
    const m = instruments();
    if (!m) return nothingToRecord;
    const started = performance.now();
    const label = statementLabel(config.name, config.text);
    return () =>
      m.storeDuration.record((performance.now() - started) / 1000, {
        'idempotency.statement': label,
      });
  },
};
