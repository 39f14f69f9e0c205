/**
 * `npm run bench:build && node dist-bench/bench/row-width.js`: what the width of a returned row
 * costs the app per statement, in pg's RowDescription and DataRow handling. One connection, the
 * same named statement shape as the store's claim (13 columns, the claimed branch: mostly NULLs)
 * against one column (the floor's `RETURNING id`), 20 000 sequential executions each, 4 rounds;
 * prints the process's CPU (user + system) per statement.
 */
import pg from 'pg';

const client = new pg.Client(
  process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
);
await client.connect();
const wide = {
  name: 'row_width_13',
  text: `SELECT $1::uuid AS id, true AS claimed, true AS locked, NULL::varchar AS status,
       true AS same_request, false AS stale, NULL::smallint AS status_code,
       NULL::float8 AS expires_ms, NULL::float8 AS seconds_left, NULL::jsonb AS response_headers,
       NULL::bytea AS response_raw, NULL::varchar AS response_key_id, false AS digested`,
};
const narrow = { name: 'row_width_1', text: 'SELECT $1::uuid AS id' };
const id = '0d1c6a1e-7d2b-4a34-9a43-0a4b3d5c6e7f';

async function cpuPerStatement(statement: typeof wide, n: number): Promise<number> {
  const start = process.cpuUsage();
  for (let i = 0; i < n; i++) await client.query({ ...statement, values: [id] });
  const used = process.cpuUsage(start);
  return (used.user + used.system) / n;
}

try {
  for (let round = 1; round <= 4; round++) {
    await cpuPerStatement(wide, 3000);
    await cpuPerStatement(narrow, 3000);
    const w = await cpuPerStatement(wide, 20_000);
    const n = await cpuPerStatement(narrow, 20_000);
    console.log(
      `round ${round}: 13 columns ${w.toFixed(1)} µs, 1 column ${n.toFixed(1)} µs of CPU per statement: +${(w - n).toFixed(1)} µs`,
    );
  }
} finally {
  await client.end();
}
