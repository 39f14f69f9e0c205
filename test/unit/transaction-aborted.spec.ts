import { describe, expect, it } from '@jest/globals';
import {
  TransactionAbortedError,
  transactionAborted,
} from '../../lib/store/transaction-aborted.error.js';

describe('transactionAborted', () => {
  const aborted = new TransactionAbortedError(
    'the claim was taken over before the transaction began',
  );

  it('finds the error itself, or wrapped by an ORM (driverError, cause)', () => {
    expect(transactionAborted(aborted)).toBe(aborted);
    expect(transactionAborted({ message: 'query failed', driverError: aborted })).toBe(aborted);
    expect(
      transactionAborted(new Error('outer', { cause: new Error('mid', { cause: aborted }) })),
    ).toBe(aborted);
  });

  it("finds one copied into another error (MikroORM's DriverException takes its own properties)", () => {
    const copied = Object.assign(new Error(aborted.message), { detail: aborted.detail });
    expect(transactionAborted(copied)?.detail).toBe(aborted.detail);
  });

  it('finds nothing in other errors, even ones with a detail', () => {
    expect(transactionAborted(new Error('boom'))).toBeUndefined();
    expect(
      transactionAborted({ message: 'duplicate key', detail: 'Key (id)=(1) exists' }),
    ).toBeUndefined();
    expect(transactionAborted(undefined)).toBeUndefined();
  });
});
