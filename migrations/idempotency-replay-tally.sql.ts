import { replayViews, sqlNames } from './idempotency-audit.sql.js';

/**
 * `ALTER TABLE <records> <action>` for a storage parameter. A partitioned table has no storage
 * and refuses one (`unrecognized parameter`): its partitions that hold rows get it instead
 * (partitions created later do not inherit it).
 */
function storageOfRecords(records: string, action: string): string {
  return `DO $$
DECLARE
  part regclass;
BEGIN
  IF (SELECT relkind FROM pg_class WHERE oid = '${records}'::regclass) <> 'p' THEN
    ALTER TABLE ${records} ${action};
    RETURN;
  END IF;
  FOR part IN SELECT t.relid FROM pg_partition_tree('${records}'::regclass) t
                JOIN pg_class c ON c.oid = t.relid
               WHERE t.isleaf AND c.relkind = 'r' LOOP
    EXECUTE format('ALTER TABLE %s ${action}', part);
  END LOOP;
END
$$`;
}

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
    storageOfRecords(records, 'SET (fillfactor = 90)'),
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
    storageOfRecords(records, 'RESET (fillfactor)'),
    views.deduplications,
    views.dailySummary,
    `ALTER TABLE ${replays} DROP COLUMN IF EXISTS first_replayed_at, DROP COLUMN IF EXISTS replay_count`,
  ];
}

export const REPLAY_TALLY_UP = replayTallyUp();
export const REPLAY_TALLY_DOWN = replayTallyDown();
