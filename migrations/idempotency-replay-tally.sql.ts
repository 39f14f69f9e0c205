import { replayViews, sqlNames } from './idempotency-audit.sql.js';

/**
 * One replay row per record per audit flush instead of one per replay: `replay_count` replays
 * between `first_replayed_at` and `replayed_at` (the last). Rows already written count one.
 * The reconciliation views sum the counts, so they answer as before.
 */
export function replayTallyUp(tableName = 'idempotency_keys'): string[] {
  const { records, replays } = sqlNames(tableName);
  const views = replayViews(tableName, true);
  return [
    // Room on each page, so bumping a record's replay counters is a HOT update (no index writes).
    `ALTER TABLE ${records} SET (fillfactor = 90)`,
    `ALTER TABLE ${replays}
  ADD COLUMN IF NOT EXISTS replay_count integer NOT NULL DEFAULT 1 CHECK (replay_count > 0),
  ADD COLUMN IF NOT EXISTS first_replayed_at timestamptz`,
    views.deduplications,
    views.dailySummary,
  ];
}

/** Back to one row per replay: the views count rows again, then the columns go. */
export function replayTallyDown(tableName = 'idempotency_keys'): string[] {
  const { records, replays } = sqlNames(tableName);
  const views = replayViews(tableName, false);
  return [
    `ALTER TABLE ${records} RESET (fillfactor)`,
    views.deduplications,
    views.dailySummary,
    `ALTER TABLE ${replays} DROP COLUMN IF EXISTS first_replayed_at, DROP COLUMN IF EXISTS replay_count`,
  ];
}

export const REPLAY_TALLY_UP = replayTallyUp();
export const REPLAY_TALLY_DOWN = replayTallyDown();
