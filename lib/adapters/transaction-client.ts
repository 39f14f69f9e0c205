export type {
  TransactionAdapter,
  TransactionClient,
} from '../interfaces/transaction-adapter.interface.js';
