import type {
  TransactionAdapter,
  TransactionClient,
} from '../../interfaces/transaction-adapter.interface.js';

/**
 * The handler writes through the store's connection itself, with pg's `query`: the default
 * with the `pool` option.
 * @example
 * async charge(@IdempotencyCtx() idem: IdempotencyContext<TransactionClient>) {
 *   await idem.manager!.query('INSERT INTO ledger (ref) VALUES ($1)', [ref]);
 * }
 */
export function pgTransactions(): TransactionAdapter<TransactionClient> {
  return { bind: (client) => client };
}
