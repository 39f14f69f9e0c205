/**
 * `ctx.keyFor()` and `ctx.step()` over HTTP, two app instances on one database: a run abandoned
 * after its charge step (its lease made to end) is taken over by the other instance, which
 * resumes from the committed step: the processor is called once, and both runs derive one key.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, HttpCode, Module, Post } from '@nestjs/common';
import { randomBytes, randomUUID } from 'node:crypto';
import {
  Idempotent,
  IdempotencyCtx,
  IdempotencyModule,
  PostgresIdempotencyStore,
  type IdempotencyContext,
} from '../../lib/index.js';
import { send } from '../fixtures/http-client.js';
import { listenApp, type ListeningApp } from '../fixtures/listen.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { waitFor } from '../reliability/support.js';
import { endLease, stepsCommitted } from '../fixtures/abandoned-run.js';

const processor = { calls: 0, perKey: new Map<string, number>() };
/** The derived key each run computed, in order. */
const seenKeys: string[] = [];
/** Each run waits on the next gate (if any) after its charge step. */
const gates: Promise<void>[] = [];

function gate(): { opened: Promise<void>; open: () => void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

@Controller()
class ChargesController {
  @Post('charges')
  @HttpCode(201)
  @Idempotent()
  async charge(@Body() dto: { amount: number }, @IdempotencyCtx() idem?: IdempotencyContext) {
    const key = idem!.keyFor('charge');
    seenKeys.push(key);
    const charge = await idem!.step('charge', async () => {
      processor.calls++;
      processor.perKey.set(key, (processor.perKey.get(key) ?? 0) + 1);
      return { id: `ch_${processor.calls}`, amount: dto.amount };
    });
    const wait = gates.shift();
    if (wait) await wait;
    return { charge, run: idem!.run };
  }
}

describe.each(['plaintext', 'encrypted'] as const)('recovery points over HTTP (%s)', (mode) => {
  let db: MigratedDatabase;
  let a: ListeningApp;
  let b: ListeningApp;
  const encryption =
    mode === 'encrypted'
      ? { keys: { k1: randomBytes(32).toString('base64') }, activeKeyId: 'k1' }
      : undefined;

  const start = (dataSource: MigratedDatabase['dataSource']) => {
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          dataSource,
          derivedKeySecret: 'x'.repeat(32),
          encryption,
          cleanup: { enabled: false },
        }),
      ],
      controllers: [ChargesController],
    })
    class AppModule {}
    return listenApp(AppModule);
  };

  beforeAll(async () => {
    db = await createMigratedDatabase(`recovery_${mode}`);
    a = await start(db.dataSource);
    b = await start(db.newDataSource());
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await db?.drop();
  });

  const steps = (key: string) =>
    db.dataSource.query(
      `SELECT s.name, s.run, s.resumed_count, s.result, s.result_key_id, k.runs
         FROM idempotency_keys_steps s JOIN idempotency_keys k ON k.id = s.record_id
        WHERE k.idempotency_key = $1`,
      [key],
    );

  /** A run on instance A, held after its committed step, whose lease then ends as if A died. */
  const abandonAfterStep = async (key: string, body: object) => {
    const first = gate();
    gates.push(first.opened);
    const abandoned = send(a.url, '/charges', { key, body });
    await stepsCommitted(db.dataSource, key);
    // Its heartbeat would renew the lease only much later.
    await endLease(db.dataSource, key);
    return { first, abandoned };
  };

  it('resumes an abandoned run from its committed step: one charge, one derived key, 409 meanwhile', async () => {
    const key = randomUUID();
    const body = { amount: 1999 };
    const calls = processor.calls;
    const { first, abandoned } = await abandonAfterStep(key, body);
    const second = gate();
    gates.push(second.opened);
    const resumed = send(b.url, '/charges', { key, body });
    await waitFor('the takeover', async () => (await steps(key))[0]?.runs === 2, 10_000);
    // While the second run resumes, a duplicate is refused as before.
    const duplicate = await send(a.url, '/charges', { key, body });
    expect(duplicate.status).toBe(409);

    second.open();
    const answer = await resumed;
    expect(answer.status).toBe(201);
    expect(answer.json()).toEqual({ charge: { id: `ch_${calls + 1}`, amount: 1999 }, run: 2 });
    first.open();
    await abandoned;

    expect(processor.calls).toBe(calls + 1);
    expect(seenKeys.slice(-2)[0]).toBe(seenKeys.slice(-1)[0]);
    expect(processor.perKey.get(seenKeys.at(-1)!)).toBe(1);
    const [step] = await steps(key);
    expect(step).toMatchObject({ name: 'charge', run: 1, resumed_count: 1, runs: 2 });
    const stored = (step.result as Buffer).toString('latin1');
    if (mode === 'encrypted') {
      expect(step.result_key_id).toBe('k1');
      expect(stored).not.toContain('ch_');
    } else {
      expect(JSON.parse(stored)).toEqual({ id: `ch_${calls + 1}`, amount: 1999 });
    }
    const replay = await send(b.url, '/charges', { key, body });
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body.equals(answer.body)).toBe(true);
    // What finance reads: two runs, one charge step, resumed.
    const recoveries = await db.dataSource.query(
      `SELECT status, runs, steps, step_names, resumed_steps FROM idempotency_keys_recoveries
        WHERE idempotency_key = $1`,
      [key],
    );
    expect(recoveries).toEqual([
      { status: 'completed', runs: 2, steps: 1, step_names: ['charge'], resumed_steps: ['charge'] },
    ]);
  });

  it('never frees the key when a committed step cannot be read: the charge is not made again', async () => {
    const key = randomUUID();
    const body = { amount: 4242 };
    const calls = processor.calls;
    const { first, abandoned } = await abandonAfterStep(key, body);
    // A row changed in SQL: sealed, it no longer authenticates; in plaintext, it is no JSON.
    const flip = `UPDATE idempotency_keys_steps s SET result = set_byte(result, 0, get_byte(result, 0) # 255)
        FROM idempotency_keys k WHERE k.id = s.record_id AND k.idempotency_key = $1`;
    await db.dataSource.query(flip, [key]);

    const unreadable = await send(b.url, '/charges', { key, body });
    expect(unreadable.status).toBe(503);
    expect(unreadable.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(unreadable.json()).toMatchObject({ code: 'idempotency_store_unavailable' });
    expect(Number(unreadable.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(processor.calls).toBe(calls + 1);
    // Kept, not freed: a retry meets the claim until its lease ends, never a fresh run.
    expect((await send(a.url, '/charges', { key, body })).status).toBe(409);
    const [record] = await db.records('idempotency_key = $1', [key]);
    expect(record.status).toBe('in_progress');

    // Mended (the row restored, as a key put back in the configuration would): the run resumes.
    await db.dataSource.query(flip, [key]);
    await endLease(db.dataSource, key);
    const resumed = await send(b.url, '/charges', { key, body });
    expect(resumed.status).toBe(201);
    expect(resumed.json()).toMatchObject({ charge: { id: `ch_${calls + 1}`, amount: 4242 } });
    expect(processor.calls).toBe(calls + 1);
    first.open();
    await abandoned;
  });

  it('cleanup deletes recovery points whose record is gone, never those of a live record', async () => {
    const key = randomUUID();
    expect((await send(a.url, '/charges', { key, body: { amount: 1 } })).status).toBe(201);
    await db.dataSource.query(
      `INSERT INTO idempotency_keys_steps (record_id, name, result, run, completed_at)
       VALUES (gen_random_uuid(), 'charge', '1', 1, now() - interval '2 hours')`,
    );
    await db.dataSource.query(
      `UPDATE idempotency_keys_steps SET completed_at = now() - interval '2 hours'`,
    );
    const store = new PostgresIdempotencyStore(db.dataSource, 'idempotency_keys');
    await store.cleanup({ batchSize: 100, retentionSeconds: 3600 });
    const orphans = await db.dataSource.query(
      `SELECT count(*)::int AS n FROM idempotency_keys_steps s
        WHERE NOT EXISTS (SELECT 1 FROM idempotency_keys k WHERE k.id = s.record_id)`,
    );
    expect(orphans).toEqual([{ n: 0 }]);
    expect(await steps(key)).toHaveLength(1);
  });
});
