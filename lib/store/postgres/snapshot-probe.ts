import { type Queryable, type QueryConfig } from './pg-deadline.js';
import { pipelineWithin, settledValue } from './pg-pipeline.js';

const SERIALIZATION_FAILURE = '40001';

/**
 * Whether a record of the scope was committed after the snapshot of the transaction on `client`
 * (REPEATABLE READ or SERIALIZABLE, the scope's lock held): `probe` inserts the scope's row under
 * a savepoint, rolled back at once, in one round trip. The unique index sees the committed row
 * the snapshot does not, and PostgreSQL refuses the insert with 40001 instead of doing nothing.
 * Same connection, same transaction: no second connection is needed, behind a pooler either.
 */
export async function committedAfterSnapshot(
  client: Queryable,
  probe: QueryConfig,
  timeoutMs: number,
): Promise<boolean> {
  const [save, insert, back] = await pipelineWithin(
    client,
    [
      { text: 'SAVEPOINT idem_snapshot_probe', values: [] },
      probe,
      { text: 'ROLLBACK TO SAVEPOINT idem_snapshot_probe', values: [] },
    ],
    timeoutMs,
  );
  settledValue(save);
  const raced =
    insert.status === 'rejected' &&
    (insert.reason as { code?: string }).code === SERIALIZATION_FAILURE;
  if (!raced) settledValue(insert);
  settledValue(back);
  return raced;
}
