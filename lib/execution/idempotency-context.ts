import type { EntityManager } from 'typeorm';
import type { IdempotencyScope } from '../interfaces/idempotency-store.interface.js';
import type { IdempotencyRequest } from '../interfaces/idempotency-module-options.interface.js';
import type { IdempotentOptions } from '../interfaces/idempotent-options.interface.js';
import type { RecoveryPoints } from '../recovery/recovery-points.js';

/** Beside the request, not on it: a new key on Express's `req` is a slow-path store (a map transition per request). */
const contexts = new WeakMap<object, IdempotencyContext<unknown>>();

/** `transaction_id varchar(255)`. */
export const MAX_TRANSACTION_ID = 255;

/** The id as stored, or null when `transaction_id` cannot hold it. */
export function checkTransactionId(id: unknown): string | null {
  if (typeof id !== 'string' && typeof id !== 'number' && typeof id !== 'bigint') return null;
  const text = String(id);
  return text.length > 0 && text.length <= MAX_TRANSACTION_ID && !text.includes('\u0000')
    ? text
    : null;
}

/**
 * The id a route's `transactionId(body, req)` derives from its response: null when it gives none
 * or throws; `onUnusable` hears of one `transaction_id` cannot hold (stored as none).
 */
export function derivedTransactionId(
  derive: IdempotentOptions['transactionId'],
  req: object,
  body: () => unknown,
  onUnusable: () => void,
): string | null {
  if (!derive) return null;
  let derived: unknown;
  try {
    derived = derive(body(), req as IdempotencyRequest);
  } catch {
    return null;
  }
  if (derived === undefined || derived === null) return null;
  const id = checkTransactionId(derived);
  if (id === null) onUnusable();
  return id;
}

/**
 * What a handler running under a claimed key can see and set. `TManager` is what the store's
 * transactions hand out (the module's `transactions` adapter): a TypeORM `EntityManager` with
 * `dataSource` (the type's default, so existing code compiles unchanged), the `TransactionClient`
 * with `pool`: write `IdempotencyContext<TransactionClient>` there.
 */
export class IdempotencyContext<TManager = EntityManager> {
  private txId: string | null = null;

  /**
   * In transactional mode (`@Idempotent({ transactional: true | 'single' })`), what the
   * handler writes through in the one transaction that also completes this record (an
   * EntityManager, pg's `query`, another tool's transaction: see `TManager`); undefined otherwise.
   */
  manager?: TManager;

  private recovery?: RecoveryPoints;

  constructor(readonly scope: IdempotencyScope) {}

  /** @internal Set by the library for a run under a claimed key. */
  bindRecoveryPoints(recovery: RecoveryPoints): void {
    this.recovery = recovery;
  }

  private recoveryPoints(): RecoveryPoints {
    if (!this.recovery) {
      throw new Error('nestjs-pg-idempotency: no idempotency key, so no keyFor() nor step()');
    }
    return this.recovery;
  }

  /** Which run of the record this is: 1, plus one per takeover of an abandoned run. */
  get run(): number {
    return this.recovery?.run ?? 1;
  }

  /**
   * An idempotency key for a downstream call (a card processor, a mail API): the same on every
   * run of this record on every instance, different for another key, endpoint, user or `name`,
   * and not computable from the inbound key without the `derivedKeySecret` option (required).
   * @example await stripe.paymentIntents.create(params, { idempotencyKey: idem.keyFor('charge') })
   */
  keyFor(name: string): string {
    return this.recoveryPoints().keyFor(name);
  }

  /**
   * A recovery point: runs `fn` once per record and commits its JSON result before returning it;
   * a later run of the record (after a crash and the lease) gets the stored result without
   * calling `fn`. A step that threw runs again. Not on transactional routes (throws there).
   * @example const charge = await idem.step('charge', () => processor.charge(dto, idem.keyFor('charge')));
   */
  step<T>(name: string, fn: () => T | Promise<T>): Promise<T> {
    return this.recoveryPoints().step(name, fn);
  }

  /**
   * Links the record to the transaction this operation produced (e.g. the charge id).
   * Throws a TypeError for an id the record cannot hold (empty, over 255 characters, NUL), so the
   * mistake surfaces in the handler instead of losing the record of an operation that ran.
   */
  setTransactionId(id: string | number): void {
    const checked = checkTransactionId(id);
    if (checked === null) {
      throw new TypeError(
        `nestjs-pg-idempotency: invalid transaction id ${JSON.stringify(String(id).slice(0, 40))}: 1 to ${MAX_TRANSACTION_ID} characters, no NUL`,
      );
    }
    this.txId = checked;
  }

  get transactionId(): string | null {
    return this.txId;
  }
}

export function attachIdempotencyContext(req: object, ctx: IdempotencyContext<unknown>): void {
  contexts.set(req, ctx);
}

/** The context of the current request, or undefined when it carries no key. */
export function getIdempotencyContext(req: object): IdempotencyContext | undefined {
  return contexts.get(req) as IdempotencyContext | undefined;
}
