import type { Logger } from '@nestjs/common';

/**
 * The library's OpenTelemetry metrics on a Prometheus endpoint, when OTEL_EXPORTER_PROMETHEUS_PORT
 * is set (e.g. 9464: `curl localhost:9464/metrics`). Registered before the app starts, as an
 * app's SDK set-up would be; without it the library's telemetry calls are no-ops.
 */
export async function startPrometheus(
  logger: Pick<Logger, 'log'>,
  env: NodeJS.ProcessEnv = process.env,
): Promise<(() => Promise<void>) | undefined> {
  const port = env.OTEL_EXPORTER_PROMETHEUS_PORT;
  if (!port) return undefined;
  const { metrics } = await import('@opentelemetry/api');
  const { MeterProvider } = await import('@opentelemetry/sdk-metrics');
  const { PrometheusExporter } = await import('@opentelemetry/exporter-prometheus');
  const exporter = new PrometheusExporter({
    host: env.HOST ?? '127.0.0.1',
    port: Number(port),
    preventServerStart: true,
  });
  await exporter.startServer();
  const provider = new MeterProvider({ readers: [exporter] });
  metrics.setGlobalMeterProvider(provider);
  logger.log(`Prometheus metrics on port ${port}, path /metrics`);
  return async () => {
    await provider.shutdown();
    metrics.disable();
  };
}
