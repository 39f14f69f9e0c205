import { randomBytes } from 'node:crypto';
import { ResponseCipher } from '../lib/response-cipher.js';

/**
 * Cost of `encryption` per stored response (`npm run bench:build && node dist-bench/bench/cipher.js`):
 * sealing happens once per completion, opening once per replay that reaches PostgreSQL.
 */
const cipher = new ResponseCipher({ keys: { a: randomBytes(32) }, activeKeyId: 'a' });
const aad = ResponseCipher.aad([
  '0b7c1d4e-2f3a-4b5c-8d9e-0f1a2b3c4d5e',
  'alice',
  'POST /payments',
  '8e03978e-40d5-43e8-bc93-6894a57f9324',
  'a'.repeat(64),
  201,
]);
const headers = { 'content-type': 'application/json; charset=utf-8', location: '/payments/p_1' };

function microseconds(runs: number, fn: () => void): number {
  const started = process.hrtime.bigint();
  for (let i = 0; i < runs; i++) fn();
  return Number(process.hrtime.bigint() - started) / runs / 1000;
}

for (const size of [200, 4096, 65_536, 1_048_576]) {
  const response = { headers, body: randomBytes(size) };
  const runs = size > 100_000 ? 200 : 20_000;
  let sealed = cipher.seal(response, aad).sealed;
  microseconds(200, () => cipher.open('a', cipher.seal(response, aad).sealed, aad));
  const seal = microseconds(runs, () => (sealed = cipher.seal(response, aad).sealed));
  const open = microseconds(runs, () => cipher.open('a', sealed, aad));
  console.log(
    `body ${String(size).padStart(7)} B: seal ${seal.toFixed(1).padStart(6)} µs, open ${open.toFixed(1).padStart(6)} µs, +${sealed.length - size} B stored`,
  );
}
