import { describe, expect, it } from '@jest/globals';
import { isConnectionFailure } from '../../lib/store/postgres/server-identity.js';
import { StoreTimeoutError } from '../../lib/store/postgres/pg-deadline.js';

describe('isConnectionFailure', () => {
  it('tells a lost server from a statement it refused', () => {
    const coded = (code: string) => Object.assign(new Error(code), { code });
    for (const lost of [
      new Error('Connection terminated unexpectedly'),
      coded('ECONNREFUSED'),
      coded('ECONNRESET'),
      coded('08006'),
      coded('57P01'),
      coded('57P03'),
    ]) {
      expect([lost.message, isConnectionFailure(lost)]).toEqual([lost.message, true]);
    }
    // A missed deadline (the server hangs) is not a lost server: replays keep coming from cache.
    for (const refused of [
      coded('23505'),
      coded('57014'),
      coded('25006'),
      coded('42501'),
      new Error('Query read timeout'),
      new StoreTimeoutError('a claim', 5_000),
    ]) {
      expect([refused.message, isConnectionFailure(refused)]).toEqual([refused.message, false]);
    }
  });
});
