import { type Queryable, type QueryConfig } from './pg-deadline.js';
import { pipelineWithin, settledValue } from './pg-pipeline.js';
import { SERIALIZATION_FAILURE } from './serialization-retry.js';

/**
 * Whether a record of the scope was committed after the snapshot of the transaction on `client`
 * (REPEATABLE READ or SERIALIZABLE, the scope's lock held): `probe` inserts the scope's row under
 * a savepoint, rolled back and released at once, in one round trip. The unique index sees the
 * committed row the snapshot does not, and PostgreSQL refuses the insert with 40001 instead of
 * doing nothing. Under SERIALIZABLE, 40001 may also be its own read/write conflict check.
 * Same connection, same transaction: no second connection is needed, behind a pooler either.
 */
export async function committedAfterSnapshot(
  client: Queryable,
  probe: QueryConfig,
  timeoutMs: number,
): Promise<boolean> {
  const [save, insert, back, release] = await pipelineWithin(
    client,
    [
      { text: 'SAVEPOINT idem_snapshot_probe', values: [] },
      probe,
      { text: 'ROLLBACK TO SAVEPOINT idem_snapshot_probe', values: [] },
      // ROLLBACK TO keeps the savepoint: the handler's writes would run in a subtransaction.
      { text: 'RELEASE SAVEPOINT idem_snapshot_probe', values: [] },
    ],
    timeoutMs,
  );
  settledValue(save);
  const raced =
    insert.status === 'rejected' &&
    (insert.reason as { code?: string }).code === SERIALIZATION_FAILURE;
  if (!raced) settledValue(insert);
  settledValue(back);
  settledValue(release);
  return raced;
}

/** A claim refused by the probe twice: the transaction could not be serialized; nothing ran. */
export function serializationFailure(): Error {
  return Object.assign(
    new Error(
      'nestjs-pg-idempotency: the claim could not be serialized with concurrent transactions (40001, twice); nothing ran, retry with the same key',
    ),
    { code: SERIALIZATION_FAILURE },
  );
}
