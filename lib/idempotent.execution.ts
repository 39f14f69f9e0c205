import type { ServerResponse } from 'node:http';
import type { CallHandler, LoggerService } from '@nestjs/common';
import { catchError, type Observable, throwError } from 'rxjs';
import type { ResolvedIdempotencyOptions } from './idempotency.defaults.js';
import { attachIdempotencyContext, IdempotencyContext } from './idempotency-context.js';
import type { IdempotentRoute } from './idempotent-route.resolver.js';
import type {
  IdempotencyScope,
  IdempotencyStore,
  Lease,
} from './interfaces/idempotency-store.interface.js';
import { holdResponse, type WireResponse } from './response-capture.js';

/** One handler run under a claimed key: keeps the lease alive, then stores or releases. */
export class IdempotentExecution {
  private error: unknown = undefined;
  private heartbeat?: NodeJS.Timeout;
  private readonly context: IdempotencyContext;

  constructor(
    private readonly options: ResolvedIdempotencyOptions,
    private readonly store: IdempotencyStore,
    private readonly logger: LoggerService,
    private readonly route: IdempotentRoute,
    private readonly scope: IdempotencyScope,
    private readonly lease: Lease,
  ) {
    this.context = new IdempotencyContext(scope);
  }

  run(req: object, res: ServerResponse, next: CallHandler): Observable<unknown> {
    attachIdempotencyContext(req, this.context);
    this.startHeartbeat();
    holdResponse(res, this.options.replayHeaders, {
      onStream: () => {
        this.stopHeartbeat();
        void this.release('the response is streamed and cannot be stored');
      },
      onEnd: (wire) => this.finish(req, wire),
    });
    return next.handle().pipe(
      catchError((err) => {
        this.error = err;
        return throwError(() => err);
      }),
    );
  }

  private async finish(req: object, wire: WireResponse): Promise<void> {
    this.stopHeartbeat();
    if (!this.options.storeIf(wire.statusCode, this.error)) {
      await this.release(`status ${wire.statusCode} is not stored`);
      return;
    }
    const storable = wire.body.length <= this.options.maxResponseBytes;
    const parsed = storable ? parseJson(wire) : undefined;
    try {
      const stored = await this.store.complete(this.lease, {
        statusCode: wire.statusCode,
        headers: wire.headers,
        body: storable ? wire.body : null,
        bodyJson: parsed?.text ?? null,
        transactionId: this.transactionId(req, parsed, wire),
        ttlSeconds: this.route.ttlSeconds,
      });
      if (!stored) {
        this.logger.error?.(
          `Lost the claim of ${this.describe()} before completion; its response was not stored`,
        );
      }
    } catch (err) {
      // The claim stays in progress: deleting it would let a retry run the operation again.
      this.logger.error?.(
        `Could not store the response of ${this.describe()}; the key stays in progress until its lease ends: ${(err as Error).message}`,
      );
    }
  }

  private transactionId(req: object, parsed: { value: unknown } | undefined, wire: WireResponse) {
    if (this.context.transactionId !== null) return this.context.transactionId;
    if (!this.route.transactionId) return null;
    try {
      const body = parsed ? parsed.value : wire.body.toString('utf8');
      const id = this.route.transactionId(body, req);
      return id === undefined || id === null ? null : String(id);
    } catch {
      return null;
    }
  }

  private async release(reason: string): Promise<void> {
    try {
      await this.store.release(this.lease);
    } catch (err) {
      this.logger.warn?.(
        `Could not release ${this.describe()} (${reason}); it frees when its lease ends: ${(err as Error).message}`,
      );
    }
  }

  private startHeartbeat(): void {
    const everyMs = (this.options.leaseSeconds * 1000) / 3;
    const stopAt = Date.now() + this.options.maxHoldSeconds * 1000;
    this.heartbeat = setInterval(() => {
      if (Date.now() >= stopAt) return this.stopHeartbeat();
      this.store.renew(this.lease, this.options.leaseSeconds).then(
        (held) => {
          if (!held) this.stopHeartbeat();
        },
        (err: Error) => this.logger.warn?.(`Lease renewal failed for ${this.describe()}: ${err.message}`),
      );
    }, everyMs);
    this.heartbeat.unref();
  }

  private stopHeartbeat(): void {
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = undefined;
  }

  private describe(): string {
    return `key ${JSON.stringify(this.scope.key)} on ${this.scope.endpoint}`;
  }
}

/** JSON bodies are also kept as `jsonb` for queries; NUL cannot go into jsonb, so skip those. */
function parseJson(wire: WireResponse): { text: string; value: unknown } | undefined {
  if (!(wire.headers['content-type'] ?? '').includes('json')) return undefined;
  const text = wire.body.toString('utf8');
  if (text.includes('\\u0000')) return undefined;
  try {
    return { text, value: JSON.parse(text) };
  } catch {
    return undefined;
  }
}
