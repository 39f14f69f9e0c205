import { ProblemCode } from '../idempotency.constants.js';
import type { RejectCode } from '../execution/idempotency.coordinator.js';

/** Status of each refusal, whatever the transport; a mismatch answers the `mismatchStatus` option. */
const REJECT_STATUS = {
  [ProblemCode.InProgress]: 409,
  [ProblemCode.StoreUnavailable]: 503,
  [ProblemCode.NothingToReplay]: 404,
} as const;

/** The refusal's status, and whether the client should retry later (then told how long). */
export function rejectStatus(
  code: RejectCode,
  mismatchStatus: number,
): { status: number; retry: boolean } {
  if (code === ProblemCode.Mismatch) return { status: mismatchStatus, retry: false };
  return { status: REJECT_STATUS[code], retry: code !== ProblemCode.NothingToReplay };
}
