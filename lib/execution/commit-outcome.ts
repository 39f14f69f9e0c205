/**
 * Whether a failed COMMIT may still have committed. PostgreSQL answering with an error
 * (pg's `DatabaseError` carries its `severity`) means it did not; no answer (a deadline, a lost
 * connection) leaves it unknown: the COMMIT may have run when the bytes arrived.
 */
export function commitOutcomeUnknown(err: unknown): boolean {
  return typeof (err as { severity?: unknown } | null)?.severity !== 'string';
}
