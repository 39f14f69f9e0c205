/**
 * A claim's row, fenced by its token, still in progress: `$1` the record id, `$2` the token.
 * Spelled `(status = 'in_progress') IS TRUE`, which means the same: a plain `status =
 * 'in_progress'` matches the predicate of the partial index on in-progress rows, which is small,
 * so the planner scans it all (every claim in flight, and its dead versions until vacuum) and
 * filters by id, instead of one probe of the primary key. Under SERIALIZABLE that scan also
 * takes predicate locks on the index and heap pages every claim writes, and concurrent
 * transactional first calls abort one another.
 */
export function ownedClaim(alias?: string): string {
  const k = alias ? `${alias}.` : '';
  return `${k}id = $1 AND ${k}owner_token = $2 AND (${k}status = 'in_progress') IS TRUE`;
}
