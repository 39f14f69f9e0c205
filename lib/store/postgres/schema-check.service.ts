import { Inject, Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { IDEMPOTENCY_STORE } from '../../idempotency.constants.js';
import type { IdempotencyStore } from '../../interfaces/idempotency-store.interface.js';

/**
 * Fails bootstrap when the store's `checkSchema()` rejects (for the PostgreSQL store: the
 * library's migrations were not run, or the database cannot serve claims, see
 * `topologyProblems`), instead of answering 503 to every keyed request. Runs at
 * `onApplicationBootstrap`, so migrations run by the app at module init are in place. A database that does not answer is not a reason to refuse to start: the app
 * starts with a warning, and keyed requests answer 503 until PostgreSQL is back.
 */
@Injectable()
export class SchemaCheckService implements OnApplicationBootstrap {
  private readonly logger = new Logger('IdempotencySchema');

  constructor(@Inject(IDEMPOTENCY_STORE) private readonly store: IdempotencyStore) {}

  async onApplicationBootstrap(): Promise<void> {
    // A store without the method (a custom one) brings its own storage.
    const warning = await this.store.checkSchema?.();
    if (warning) this.logger.warn(warning);
  }
}
