import { createHash } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { CallHandler, LoggerService } from '@nestjs/common';
import { catchError, type Observable, throwError } from 'rxjs';
import type { QueryRunner } from 'typeorm';
import { ProblemCode } from './idempotency.constants.js';
import type { ResolvedIdempotencyOptions } from './idempotency.defaults.js';
import { attachIdempotencyContext, IdempotencyContext } from './idempotency-context.js';
import { IdempotencyProblemException, PROBLEM_CONTENT_TYPE } from './idempotency.problems.js';
import type { IdempotentRoute } from './idempotent-route.resolver.js';
import type {
  IdempotencyScope,
  IdempotencyStore,
  Lease,
  StoredResponse,
} from './interfaces/idempotency-store.interface.js';
import { holdResponse, type WireResponse } from './response-capture.js';
import { LeaseHeartbeat } from './lease-heartbeat.js';
import { lazyTransaction } from './lazy-transaction.js';

/** One handler run under a claimed key: keeps the lease alive, then stores or releases. */
export class IdempotentExecution {
  private error: unknown = undefined;
  private readonly heartbeat: LeaseHeartbeat;
  private readonly context: IdempotencyContext;
  private transaction?: QueryRunner;

  constructor(
    private readonly options: ResolvedIdempotencyOptions,
    private readonly store: IdempotencyStore,
    private readonly logger: LoggerService,
    private readonly route: IdempotentRoute,
    private readonly scope: IdempotencyScope,
    private readonly lease: Lease,
    /** Called once the response is durably stored (committed, in transactional mode). */
    private readonly onStored: (response: StoredResponse) => void = () => undefined,
  ) {
    this.context = new IdempotencyContext(scope);
    this.heartbeat = new LeaseHeartbeat(store, lease, options, logger, () => this.describe());
  }

  async run(req: object, res: ServerResponse, next: CallHandler): Promise<Observable<unknown>> {
    if (this.route.transactional) {
      this.transaction = lazyTransaction(this.options.dataSource);
      this.context.manager = this.transaction.manager;
    }
    attachIdempotencyContext(req, this.context);
    this.heartbeat.start();
    holdResponse(res, this.options.replayHeaders, {
      onStream: () => void this.streamed(),
      onEnd: (wire) => this.finish(req, wire),
    });
    return next.handle().pipe(
      catchError((err) => {
        this.error = err;
        return throwError(() => err);
      }),
    );
  }

  private async finish(req: object, wire: WireResponse): Promise<WireResponse | void> {
    this.heartbeat.stop();
    if (!this.options.storeIf(wire.statusCode, this.error)) {
      await this.endTransaction(false);
      await this.release(`status ${wire.statusCode} is not stored`);
      return;
    }
    const digestOnly = this.route.storeResponse === 'digest';
    const storable = !digestOnly && wire.body.length <= this.options.maxResponseBytes;
    const parsed = storable || digestOnly ? parseJson(wire) : undefined;
    // Captured now: a failed COMMIT has already dropped the transaction when the catch runs.
    const transaction = this.activeTransaction();
    try {
      const stored = await this.store.complete(
        this.lease,
        {
          statusCode: wire.statusCode,
          headers: wire.headers,
          body: storable ? wire.body : null,
          bodyJson: storable ? (parsed?.text ?? null) : null,
          bodyDigest: digestOnly ? createHash('sha256').update(wire.body).digest('hex') : null,
          transactionId: this.transactionId(req, parsed, wire),
          ttlSeconds: this.route.ttlSeconds,
        },
        transaction?.manager,
      );
      if (!stored) {
        this.logger.error?.(
          `Lost the claim of ${this.describe()} before completion; its response was not stored`,
        );
      }
      if (transaction && !stored) throw new Error('lease lost');
      await this.endTransaction(transaction !== undefined);
      if (stored && storable) {
        this.onStored({ statusCode: wire.statusCode, headers: wire.headers, body: wire.body });
      }
    } catch (err) {
      if (transaction) return this.abandon(err as Error);
      await this.endTransaction(false);
      // The claim stays in progress: deleting it would let a retry run the operation again.
      this.logger.error?.(
        `Could not store the response of ${this.describe()}; the key stays in progress until its lease ends: ${(err as Error).message}`,
      );
    }
  }

  /** Transactional mode, outcome not recorded: nothing was committed, so say so and free the key. */
  private async abandon(err: Error): Promise<WireResponse> {
    this.logger.error?.(`Rolled back ${this.describe()}: ${err.message}`);
    await this.endTransaction(false);
    await this.release('its transaction rolled back');
    const problem = new IdempotencyProblemException(503, ProblemCode.StoreUnavailable, {
      detail:
        'The operation was rolled back because its outcome could not be recorded; retry with the same key',
    });
    return {
      statusCode: 503,
      headers: {
        'content-type': PROBLEM_CONTENT_TYPE,
        'retry-after': String(this.options.retryAfterSeconds),
      },
      body: Buffer.from(JSON.stringify(problem.getResponse())),
    };
  }

  /** A streamed response cannot be held or stored: release the key (committing any writes). */
  private async streamed(): Promise<void> {
    this.heartbeat.stop();
    await this.endTransaction(true);
    await this.release('the response is streamed and cannot be stored');
  }

  private transactionId(req: object, parsed: { value: unknown } | undefined, wire: WireResponse) {
    if (this.context.transactionId !== null) return this.context.transactionId;
    if (!this.route.transactionId) return null;
    try {
      const id = this.route.transactionId(parsed ? parsed.value : wire.body.toString('utf8'), req);
      return id === undefined || id === null ? null : String(id);
    } catch {
      return null;
    }
  }

  /** The handler's transaction, if it began one (it starts on the handler's first query). */
  private activeTransaction(): QueryRunner | undefined {
    return this.transaction?.isTransactionActive ? this.transaction : undefined;
  }

  /** A failed commit throws; a failed rollback does not (a dead connection rolls back anyway). */
  private async endTransaction(commit: boolean): Promise<void> {
    const tx = this.transaction;
    if (!tx) return;
    this.transaction = undefined;
    try {
      if (!tx.isTransactionActive) return;
      if (commit) await tx.commitTransaction();
      else await tx.rollbackTransaction().catch(() => undefined);
    } finally {
      await tx.release().catch(() => undefined);
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
