import { CreatePaymentsAndRefunds1764700000000 } from './1764700000000-CreatePaymentsAndRefunds.js';

/** The sample's migrations, run after the library's: `[...idempotencyMigrations, ...sampleMigrations]`. */
export const sampleMigrations = [CreatePaymentsAndRefunds1764700000000];
