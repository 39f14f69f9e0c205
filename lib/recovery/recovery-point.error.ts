/**
 * A recovery point could not be read or recorded: PostgreSQL did not answer, a sealed result does
 * not open (a key removed from `encryption`, a row changed in SQL), or the claim was taken over.
 * The step may have run in this run or an earlier one, so the key is never freed for a run that
 * calls it again: the claim is kept until its lease ends, and a retry then resumes the record
 * with its steps, or meets the same error until the cause is mended.
 */
export class RecoveryPointError extends Error {
  constructor(
    readonly step: string,
    cause: unknown,
  ) {
    super(
      `nestjs-pg-idempotency: the recovery point of step ${JSON.stringify(step)} could not be read or recorded: ${(cause as Error)?.message ?? String(cause)}`,
      { cause },
    );
  }
}

/** Whether `err`, or an error it wraps (`{ cause }`, as Nest's exceptions take it), is one. */
export function isRecoveryPointFailure(err: unknown): boolean {
  for (let e = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    if (e instanceof RecoveryPointError) return true;
  }
  return false;
}
