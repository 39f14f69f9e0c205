import { randomBytes } from 'node:crypto';

/** Stripe-style ids: a type prefix and 24 random hex characters, e.g. `pay_9f1c...`. */
export const newId = (prefix: 'pay' | 're') => `${prefix}_${randomBytes(12).toString('hex')}`;
