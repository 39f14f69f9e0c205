import { PATH_METADATA } from '@nestjs/common/constants.js';
import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import { MetadataScanner, ModulesContainer } from '@nestjs/core';
import { IDEMPOTENCY_STORE } from '../idempotency.constants.js';
import { IDEMPOTENT_METADATA } from '../idempotency-internal.constants.js';
import type { IdempotentOptions } from '../interfaces/idempotent-options.interface.js';
import type {
  IdempotencyStore,
  IdempotencyTransaction,
  Lease,
} from './idempotency-store.interface.js';

function unsupported(store: IdempotencyStore, where: string): Error {
  return new Error(
    `nestjs-pg-idempotency: ${where} is @Idempotent({ transactional: true }) but the store (${store.constructor.name}) has no beginTransaction(); use a store with transactions (PostgresIdempotencyStore) or drop transactional`,
  );
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

/** Fails start-up when a transactional route exists and the bound store cannot serve it. */
@Injectable()
export class TransactionalRoutesCheck implements OnModuleInit {
  constructor(
    @Inject(IDEMPOTENCY_STORE) private readonly store: IdempotencyStore,
    private readonly modules: ModulesContainer,
  ) {}

  onModuleInit(): void {
    if (this.store.beginTransaction) return;
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
          const merged = { ...read(cls), ...read(proto[name]) };
          if (merged.transactional) throw unsupported(this.store, `${cls.name}.${name}`);
        }
      }
    }
  }
}
