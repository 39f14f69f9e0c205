import type { KeyObject } from 'node:crypto';
import type {
  IdempotencyScope,
  IdempotencyStore,
  Lease,
} from '../interfaces/idempotency-store.interface.js';
import { checkStepName, deriveKey } from './derived-key.js';
import { RecoveryPointError } from './recovery-point.error.js';

const fail = (message: string): never => {
  throw new Error(`nestjs-pg-idempotency: ${message}`);
};

/**
 * `ctx.keyFor()` and `ctx.step()` of one run of a record. A step's result is kept as JSON text,
 * so the first run and a resumed one return the same value (what `JSON.parse` gives back).
 */
export class RecoveryPoints {
  /**
   * Steps of this run, committed or being committed, by name: a name runs once per record.
   * Made by the first step: most runs have none.
   */
  private steps?: Map<string, Promise<string>>;

  constructor(
    private readonly store: IdempotencyStore,
    private readonly lease: Lease,
    private readonly scope: IdempotencyScope,
    private readonly secret: KeyObject | null,
    private readonly transactional: boolean,
  ) {}

  get run(): number {
    return this.lease.run ?? 1;
  }

  keyFor(name: string): string {
    checkStepName('keyFor()', name);
    if (!this.secret) fail('ctx.keyFor() needs the derivedKeySecret option');
    return deriveKey(this.secret as KeyObject, this.scope, name);
  }

  async step<T>(name: string, fn: () => T | Promise<T>): Promise<T> {
    checkStepName('step()', name);
    if (typeof fn !== 'function')
      throw new TypeError('nestjs-pg-idempotency: step() needs a function');
    // A recovery point committed apart from the handler's transaction would outlive its writes
    // after a crash, and one inside it would not survive the crash: neither is a recovery point.
    if (this.transactional) {
      fail(
        `ctx.step(${JSON.stringify(name)}) is not available on transactional routes: steps commit on their own, the route's transaction only at completion (see docs/recovery-points.md)`,
      );
    }
    if (!this.store.loadStep || !this.store.saveStep) {
      fail('ctx.step() needs a store with recovery points (loadStep and saveStep)');
    }
    const steps = (this.steps ??= new Map());
    let pending = steps.get(name);
    if (!pending) {
      pending = this.runOnce(name, fn);
      steps.set(name, pending);
      // A step that threw is not a recovery point: the next call (or run) runs it again. One
      // whose point could not be read or recorded may have run: this run never calls it again.
      pending.catch((err: unknown) => {
        if (!(err instanceof RecoveryPointError)) steps.delete(name);
      });
    }
    return JSON.parse(await pending) as T;
  }

  private async runOnce(name: string, fn: () => unknown): Promise<string> {
    const stored = await this.store.loadStep!(this.lease, name).catch((err: unknown) => {
      throw new RecoveryPointError(name, err);
    });
    if (stored !== null) {
      try {
        JSON.parse(stored);
      } catch (err) {
        throw new RecoveryPointError(name, err);
      }
      return stored;
    }
    // The step's own error is the handler's: it frees the key like any other.
    const text = JSON.stringify(await fn()) ?? 'null';
    const saved = await this.store.saveStep!(this.lease, name, text).catch((err: unknown) => {
      throw new RecoveryPointError(name, err);
    });
    if (!saved) {
      throw new RecoveryPointError(
        name,
        new Error('the claim was lost (its lease ended and another run took it over)'),
      );
    }
    return text;
  }
}
