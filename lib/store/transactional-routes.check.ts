import { PATH_METADATA } from '@nestjs/common/constants.js';
import { Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { MetadataScanner, ModulesContainer } from '@nestjs/core';
import { IDEMPOTENCY_STORE } from '../idempotency.constants.js';
import { IDEMPOTENT_METADATA } from '../idempotency-internal.constants.js';
import type { IdempotentOptions } from '../interfaces/idempotent-options.interface.js';
import type {
  IdempotencyStore,
  IdempotencyTransaction,
  Lease,
} from './idempotency-store.interface.js';
import { smallPoolWarning } from './postgres/single-commit-pool.check.js';

function unsupported(store: IdempotencyStore, where: string, single = false): Error {
  const [mode, method] = single
    ? [`'single'`, 'claimInTransaction()']
    : ['true', 'beginTransaction()'];
  return new Error(
    `nestjs-pg-idempotency: ${where} is @Idempotent({ transactional: ${mode} }) but the store (${store.constructor.name}) has no ${method}; use a store with transactions (PostgresIdempotencyStore) or drop transactional`,
  );
}

/** The store's single-commit claim; a clear error for a store without it. */
export function claimInTransaction(
  store: IdempotencyStore,
): NonNullable<IdempotencyStore['claimInTransaction']> {
  if (!store.claimInTransaction) throw unsupported(store, 'this route', true);
  return store.claimInTransaction.bind(store);
}

/** The store's transaction for a transactional route; a clear error for a store without any. */
export function openTransaction(
  store: IdempotencyStore,
  lease: Lease,
  onBegin: (transaction: IdempotencyTransaction) => Promise<void>,
): IdempotencyTransaction {
  if (!store.beginTransaction) throw unsupported(store, 'this route');
  return store.beginTransaction(lease, onBegin);
}

/**
 * Fails start-up when a transactional route exists and the bound store cannot serve it; warns when
 * single-commit routes run on a pool too small for them.
 */
@Injectable()
export class TransactionalRoutesCheck implements OnModuleInit {
  constructor(
    @Inject(IDEMPOTENCY_STORE) private readonly store: IdempotencyStore,
    private readonly modules: ModulesContainer,
  ) {}

  onModuleInit(): void {
    let single = false;
    for (const { where, merged } of this.routes()) {
      single ||= merged.transactional === 'single';
      if (merged.transactional === 'single' && !this.store.claimInTransaction)
        throw unsupported(this.store, where, true);
      if (merged.transactional === true && !this.store.beginTransaction)
        throw unsupported(this.store, where);
    }
    const warning = single ? smallPoolWarning(this.store) : undefined;
    if (warning) new Logger('Idempotency').warn(warning);
  }

  private *routes(): Generator<{ where: string; merged: IdempotentOptions }> {
    const scanner = new MetadataScanner();
    const read = (target: object): IdempotentOptions | undefined =>
      Reflect.getMetadata(IDEMPOTENT_METADATA, target);
    for (const moduleRef of this.modules.values()) {
      for (const wrapper of moduleRef.controllers.values()) {
        const cls = wrapper.metatype as (new (...args: never[]) => object) | null;
        if (typeof cls !== 'function') continue;
        const proto = cls.prototype as Record<string, object>;
        for (const name of scanner.getAllMethodNames(proto)) {
          if (Reflect.getMetadata(PATH_METADATA, proto[name]) === undefined) continue;
          yield { where: `${cls.name}.${name}`, merged: { ...read(cls), ...read(proto[name]) } };
        }
      }
    }
  }
}
