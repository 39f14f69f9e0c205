import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { repoRoot } from './database.js';

/**
 * The statements of `sql/migrations/001_payments_and_refunds.sql`, one string (pg runs it as one
 * implicit transaction): both flavours create the sample's tables from this one file.
 */
export const sampleSchemaSql = (): Promise<string> =>
  readFile(join(repoRoot(), 'sample-app/sql/migrations/001_payments_and_refunds.sql'), 'utf8');
