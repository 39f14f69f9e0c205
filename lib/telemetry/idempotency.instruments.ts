import type * as OTel from '@opentelemetry/api';

/**
 * Metrics and traces through `@opentelemetry/api`, an optional peer: without it installed, or
 * without an SDK registered by the app, every call here does nothing (the API's no-ops). The
 * API keeps its providers on `globalThis`, so whichever copy loads sees the app's SDK.
 */

/** The loaded API; undefined while it is not (or not installed). */
export let api: typeof OTel | undefined;
let loading: Promise<void> | undefined;

/** Loads the API once if it is installed; the module awaits this before it serves requests. */
export function loadTelemetryApi(): Promise<void> {
  loading ??= import('@opentelemetry/api').then(
    (loaded) => void (api = loaded),
    () => undefined,
  );
  return loading;
}

/** Instrumentation scope of every meter and tracer. */
export const SCOPE = 'nestjs-pg-idempotency';

function createInstruments(meter: OTel.Meter) {
  const counter = (name: string, unit: string, description: string) =>
    meter.createCounter(name, { unit, description });
  return {
    claims: counter('idempotency.claims', '{claim}', 'Claims answered by the store, by outcome'),
    executions: counter('idempotency.executions', '{run}', 'Handler runs under a claimed key'),
    replays: counter('idempotency.replays', '{replay}', 'Responses replayed, by source'),
    inFlight: counter('idempotency.in_flight', '{request}', 'Refused: the key is in progress'),
    mismatches: counter('idempotency.mismatches', '{request}', 'Keys reused with another request'),
    refusals: counter('idempotency.refusals', '{request}', 'Problem responses, by code, status'),
    unavailable: counter('idempotency.unavailable', '{request}', 'Answered 503 (fail closed)'),
    completionFailures: counter('idempotency.completion.failures', '{completion}', 'Failed'),
    completionRetries: counter(
      'idempotency.completion.retries',
      '{completion}',
      'Bytes-only retries',
    ),
    takeovers: counter('idempotency.lease.takeovers', '{claim}', 'Stale claims taken over'),
    auditDrops: counter('idempotency.audit.dropped', '{replay}', 'Replays the audit dropped'),
    cleanupDeleted: counter('idempotency.cleanup.deleted', '{record}', 'Records cleanup deleted'),
    cleanupSkipped: counter('idempotency.cleanup.skipped', '{run}', 'Cleanup runs: lock held'),
    storeDuration: meter.createHistogram('idempotency.store.duration', {
      unit: 's',
      description: "Duration of the library's PostgreSQL statements, by statement",
      advice: {
        explicitBucketBoundaries: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5],
      },
    }),
  };
}

let meterCache: {
  provider: OTel.MeterProvider;
  instruments: ReturnType<typeof createInstruments> | undefined;
};

/**
 * The instruments of the current global MeterProvider (an app may register it after start);
 * undefined while none is registered: the API's no-op meter would record nothing anyway.
 */
export function instruments() {
  if (!api) return undefined;
  const provider = api.metrics.getMeterProvider();
  if (meterCache?.provider !== provider) {
    const meter = provider.getMeter(SCOPE);
    const noop = meter.constructor === api.createNoopMeter().constructor;
    meterCache = { provider, instruments: noop ? undefined : createInstruments(meter) };
  }
  return meterCache.instruments;
}

/** A tracer that records: none while no TracerProvider is registered (checked per call, it is one property read). */
export function tracer(): OTel.Tracer | undefined {
  if (!api) return undefined;
  const provider = api.trace.getTracerProvider() as OTel.TracerProvider & {
    getDelegateTracer?(name: string): OTel.Tracer | undefined;
  };
  // The global ProxyTracerProvider hands out a delegate only once an SDK registered one.
  if (typeof provider.getDelegateTracer === 'function') return provider.getDelegateTracer(SCOPE);
  return provider.getTracer(SCOPE);
}
