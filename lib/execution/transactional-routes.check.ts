import { Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { ModulesContainer } from '@nestjs/core';
import { IDEMPOTENCY_STORE } from '../idempotency.constants.js';
import { idempotentRoutes } from '../idempotent-routes.scan.js';
import type {
  IdempotencyStore,
  IdempotencyTransaction,
  Lease,
} from '../interfaces/idempotency-store.interface.js';
import { smallPoolWarning } from '../store/postgres/single-commit-pool.check.js';

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
  req: Parameters<NonNullable<IdempotencyStore['claimInTransaction']>>[0],
): ReturnType<NonNullable<IdempotencyStore['claimInTransaction']>> {
  if (!store.claimInTransaction) throw unsupported(store, 'this route', true);
  // Looked up per call, not bound once: a wrapper or spy put on the store later is used.
  return store.claimInTransaction(req);
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
    for (const { options, name } of idempotentRoutes(this.modules)) {
      single ||= options.transactional === 'single';
      if (options.transactional === 'single' && !this.store.claimInTransaction)
        throw unsupported(this.store, name, true);
      if (options.transactional === true && !this.store.beginTransaction)
        throw unsupported(this.store, name);
    }
    const warning = single ? smallPoolWarning(this.store) : undefined;
    if (warning) new Logger('Idempotency').warn(warning);
  }
}
