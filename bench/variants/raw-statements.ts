/** The raw floors' statements (named, prepared once per connection), also run by `bench:pg-levers`. */
export const CLAIM = {
  name: 'raw_claim',
  text: `INSERT INTO idempotency_keys (idempotency_key, endpoint, request_hash, locked_until)
VALUES ($1, $2, $3, now() + interval '60 seconds')
ON CONFLICT (idempotency_key, endpoint, user_id) DO NOTHING RETURNING id`,
};
export const COMPLETE = {
  name: 'raw_complete',
  text: `UPDATE idempotency_keys SET status = 'completed', status_code = $2, response_raw = $3,
       completed_at = now(), locked_until = NULL WHERE id = $1`,
};
export const RELEASE = { name: 'raw_release', text: `DELETE FROM idempotency_keys WHERE id = $1` };
export const FIND = {
  name: 'raw_find',
  text: `SELECT status, request_hash, status_code, response_raw FROM idempotency_keys
 WHERE idempotency_key = $1 AND endpoint = $2 AND user_id = ''`,
};
