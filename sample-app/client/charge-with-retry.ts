/**
 * The client side of the Idempotency-Key pattern, for `POST /payments` of the sample app.
 *
 *   npm run sample:client -- --source tok_slow --timeout 1000
 *
 *  - ONE key per logical operation (this charge), generated once and reused on every retry:
 *    a retry is the same operation, never a new one.
 *  - Retries, with exponential backoff and full jitter, on what may be transient:
 *    a timeout or network error (the charge may or may not have happened: only the same key
 *    makes retrying safe), 409 `request_in_progress` (waits Retry-After), 503 (waits Retry-After
 *    if given), and other 5xx (the server released the key, so the retry runs the charge again).
 *  - Anything else is the answer, first-hand or replayed (`Idempotent-Replayed: true`):
 *    a 402 decline is final, a 4xx is a bug in the request. Retrying those cannot help.
 *  - Gives up after --attempts tries; the operation's outcome is then unknown, and a later retry
 *    with the SAME key (printed) settles it.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({
  options: {
    url: {
      type: 'string',
      default: process.env.SAMPLE_URL ?? `http://127.0.0.1:${process.env.PORT ?? 3000}`,
    },
    user: { type: 'string', default: 'alice' },
    amount: { type: 'string', default: '1999' },
    currency: { type: 'string', default: 'eur' },
    source: { type: 'string', default: 'tok_visa' },
    key: { type: 'string' },
    attempts: { type: 'string', default: '6' },
    timeout: { type: 'string', default: '5000' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});

if (args.help) {
  console.log(`Usage: npm run sample:client -- [--url ${args.url}] [--user alice] [--amount 1999] [--currency eur]
       [--source tok_visa|tok_slow|tok_chargeDeclined|tok_fail] [--key <uuid>] [--attempts 6] [--timeout 5000 (ms per attempt)]`);
  process.exit(0);
}

const BASE_DELAY_MS = 250;
const MAX_DELAY_MS = 8_000;
const maxAttempts = positiveInt('attempts', args.attempts);
const timeoutMs = positiveInt('timeout', args.timeout);

/** Full jitter: a random wait in [0, min(cap, base * 2^(attempt-1))]. */
const backoff = (attempt: number) =>
  Math.round(Math.random() * Math.min(MAX_DELAY_MS, BASE_DELAY_MS * 2 ** (attempt - 1)));

/** Retry-After in seconds (or an HTTP date), in ms; undefined when absent or unreadable. */
function retryAfterMs(header: string | null): number | undefined {
  if (!header) return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

async function chargeWithRetry(): Promise<number> {
  // One key for this logical operation, reused across every retry below.
  const key = args.key ?? randomUUID();
  const body = JSON.stringify({
    amount: Number(args.amount),
    currency: args.currency,
    source: args.source,
  });
  console.log(`POST ${args.url}/payments as ${args.user}, Idempotency-Key: ${key}`);
  console.log(`body ${body}, up to ${maxAttempts} attempts, ${timeoutMs} ms timeout each\n`);

  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    const started = Date.now();
    const label = `attempt ${attempt}/${maxAttempts}`;
    let wait: number;
    try {
      const res = await fetch(`${args.url}/payments`, {
        method: 'POST',
        headers: {
          Authorization: `Bearer ${args.user}`,
          'Content-Type': 'application/json',
          'Idempotency-Key': key,
        },
        body,
        signal: AbortSignal.timeout(timeoutMs),
      });
      const text = await res.text();
      const ms = Date.now() - started;
      const code = errorCode(text);
      const replayed = res.headers.get('idempotent-replayed') === 'true';
      const retryAfter = retryAfterMs(res.headers.get('retry-after'));

      if (res.status === 409 && code === 'request_in_progress') {
        wait = retryAfter ?? backoff(attempt);
        console.log(
          `${label}: 409 request_in_progress after ${ms} ms (Retry-After: ${res.headers.get('retry-after') ?? '-'}); the first attempt is still running`,
        );
      } else if (res.status >= 500) {
        wait = res.status === 503 ? (retryAfter ?? backoff(attempt)) : backoff(attempt);
        const why =
          res.status === 503
            ? 'service unavailable, try again after Retry-After'
            : 'server error, the key was released so the retry runs the charge again';
        console.log(`${label}: ${res.status}${code ? ` ${code}` : ''} after ${ms} ms: ${why}`);
      } else {
        console.log(
          `${label}: ${res.status}${code ? ` ${code}` : ''} after ${ms} ms${replayed ? ' (Idempotent-Replayed: true: the stored answer of an earlier attempt)' : ''}`,
        );
        console.log(`\n${text}\n`);
        if (res.ok) {
          console.log(replayed ? 'Charged once; this answer was replayed.' : 'Charged.');
          return 0;
        }
        console.log(
          res.status === 402
            ? 'Declined: final, do not retry.'
            : 'Refused: fix the request, then use a NEW key.',
        );
        return 1;
      }
    } catch (error) {
      const ms = Date.now() - started;
      const err = error as Error & { cause?: { code?: string } };
      const what =
        err.name === 'TimeoutError'
          ? `no answer within ${timeoutMs} ms`
          : `${err.cause?.code ?? err.name}: ${err.message}`;
      wait = backoff(attempt);
      console.log(`${label}: ${what} after ${ms} ms: the charge may or may not have happened`);
    }
    if (attempt < maxAttempts) {
      console.log(`  retrying in ${wait} ms with the same key`);
      await sleep(wait);
    }
  }
  console.log(
    `\nGave up after ${maxAttempts} attempts. The outcome is unknown: retry later with --key ${key}`,
  );
  return 2;
}

function errorCode(text: string): string | undefined {
  try {
    const parsed = JSON.parse(text) as { code?: unknown };
    return typeof parsed?.code === 'string' ? parsed.code : undefined;
  } catch {
    return undefined;
  }
}

function positiveInt(name: string, raw: string | undefined): number {
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1) {
    console.error(`--${name} must be a positive integer, got ${raw}`);
    process.exit(64);
  }
  return value;
}

process.exitCode = await chargeWithRetry();
