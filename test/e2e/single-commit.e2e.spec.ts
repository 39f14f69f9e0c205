import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  Body,
  type CallHandler,
  Controller,
  HttpException,
  Injectable,
  Module,
  type NestInterceptor,
  Post,
  RequestTimeoutException,
  StreamableFile,
  UseInterceptors,
} from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { catchError, throwError, timeout, TimeoutError } from 'rxjs';
import type { DataSource } from 'typeorm';
import {
  Idempotent,
  IdempotencyCtx,
  IdempotencyModule,
  type IdempotencyContext,
  ProblemCode,
} from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import { listenApp } from '../fixtures/listen.js';
import type { Platform } from '../fixtures/payments.fixture.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface ChargeBody {
  ref: string;
  then?: 'succeed' | 'throw' | 'decline' | 'kill-connection' | 'defer-violation' | 'race';
  holdMs?: number;
}

@Injectable()
class Timeout100 implements NestInterceptor {
  intercept(_context: unknown, next: CallHandler) {
    return next.handle().pipe(
      timeout(100),
      catchError((err) =>
        throwError(() => (err instanceof TimeoutError ? new RequestTimeoutException() : err)),
      ),
    );
  }
}

function singleController(dataSource: DataSource) {
  const write = async (idem: IdempotencyContext, body: ChargeBody) => {
    const manager = idem.manager!;
    const [{ id }] = await manager.query(
      `INSERT INTO ledger (ref, status) VALUES ($1, $2) RETURNING id::text`,
      [body.ref, body.then === 'decline' ? 'declined' : 'succeeded'],
    );
    if (body.holdMs) await sleep(body.holdMs);
    return id as string;
  };

  @Controller('single')
  class SingleController {
    @Post()
    @Idempotent({
      transactional: 'single',
      endpoint: 'ledger',
      transactionId: (body) => (body as { id?: string })?.id,
    })
    async charge(@Body() body: ChargeBody, @IdempotencyCtx() idem: IdempotencyContext) {
      const id = await write(idem, body);
      switch (body.then) {
        case 'throw':
          throw new Error('processor timeout after the insert');
        case 'decline':
          throw new HttpException({ code: 'card_declined', id }, 402);
        case 'race':
          // A writer that ignores the scope's lock committed a record meanwhile.
          await dataSource.query(
            `INSERT INTO idempotency_keys (idempotency_key, endpoint, request_hash, status, status_code)
             VALUES ($1, 'ledger', repeat('0', 64), 'completed', 201)`,
            [idem.scope.key],
          );
          break;
        case 'kill-connection': {
          const [{ pid }] = await idem.manager!.query('SELECT pg_backend_pid() AS pid');
          await dataSource.query('SELECT pg_terminate_backend($1)', [pid]);
          while (
            (await dataSource.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [pid])).length
          ) {
            await sleep(10);
          }
          break;
        }
      }
      return { id, ref: body.ref };
    }

    /** Same scope name, today's mode: a claimer of the other mode. */
    @Post('lease')
    @Idempotent({ endpoint: 'ledger' })
    async lease(@Body() body: ChargeBody) {
      await sleep(body.holdMs ?? 0);
      return { ref: body.ref, mode: 'lease' };
    }

    @Post('stream')
    @Idempotent({ transactional: 'single' })
    async stream(@Body() body: ChargeBody, @IdempotencyCtx() idem: IdempotencyContext) {
      await idem.manager!.query('INSERT INTO deferred_refs (ref) VALUES ($1)', [body.ref]);
      if (body.then === 'defer-violation') {
        await idem.manager!.query('INSERT INTO deferred_refs (ref) VALUES ($1)', [body.ref]);
      }
      return new StreamableFile(Readable.from([Buffer.from('receipt-1'), Buffer.from('-2')]));
    }

    @Post('timeout')
    @UseInterceptors(Timeout100)
    @Idempotent({ transactional: 'single' })
    async timed(@Body() body: ChargeBody, @IdempotencyCtx() idem: IdempotencyContext) {
      return { id: await write(idem, body) };
    }
  }
  return SingleController;
}

describe.each<Platform>(['express', 'fastify'])('single-commit mode on %s', (platform) => {
  let db: MigratedDatabase;
  let url: string;
  let close: () => Promise<void>;

  beforeAll(async () => {
    db = await createMigratedDatabase(`single_${platform}`);
    await db.dataSource.query(
      `CREATE TABLE ledger (id bigserial PRIMARY KEY, ref text NOT NULL, status text NOT NULL)`,
    );
    await db.dataSource.query(
      `CREATE TABLE deferred_refs (ref text, UNIQUE (ref) DEFERRABLE INITIALLY DEFERRED)`,
    );
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          dataSource: db.dataSource,
          cleanup: { enabled: false },
          replayCache: false,
        }),
      ],
      controllers: [singleController(db.dataSource)],
    })
    class AppModule {}
    ({ url, close } = await listenApp(AppModule, platform));
  });
  afterAll(async () => {
    await close?.();
    await db?.drop();
  });

  const ledger = async (ref: string) =>
    (await db.dataSource.query(`SELECT status FROM ledger WHERE ref = $1`, [ref])).map(
      (r: { status: string }) => r.status,
    );
  const record = async (key: string) => (await db.records('idempotency_key = $1', [key]))[0];
  const archived = (key: string) =>
    db.dataSource.query(`SELECT * FROM idempotency_keys_archive WHERE idempotency_key = $1`, [key]);

  it("commits the handler's writes and the completed record together, and replays", async () => {
    const key = randomUUID();
    const ref = randomUUID();
    const first = await send(url, '/single', { key, body: { ref } });
    expect(first.status).toBe(201);
    expect(await ledger(ref)).toEqual(['succeeded']);
    expect(await record(key)).toMatchObject({
      status: 'completed',
      status_code: 201,
      owner_token: null,
      locked_until: null,
      transaction_id: first.json().id,
    });
    const again = await send(url, '/single', { key, body: { ref } });
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body.equals(first.body)).toBe(true);
    expect(await ledger(ref)).toEqual(['succeeded']);
  });

  it('refuses another request under a completed key: mismatch', async () => {
    const key = randomUUID();
    expect((await send(url, '/single', { key, body: { ref: 'a' } })).status).toBe(201);
    const other = await send(url, '/single', { key, body: { ref: 'b' } });
    expect(other.status).toBe(409);
    expect(other.json().code).toBe(ProblemCode.Mismatch);
    expect(await ledger('b')).toEqual([]);
  });

  it('rolls back on throw and frees the key at once: the retry runs immediately', async () => {
    const key = randomUUID();
    const ref = randomUUID();
    expect((await send(url, '/single', { key, body: { ref, then: 'throw' } })).status).toBe(500);
    expect(await ledger(ref)).toEqual([]);
    expect(await record(key)).toBeUndefined();
    const started = Date.now();
    const retry = await send(url, '/single', { key, body: { ref, then: 'throw' } });
    expect(retry.status).toBe(500);
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it('answers a duplicate 409 at once while the first runs, in either mode', async () => {
    const key = randomUUID();
    const ref = randomUUID();
    const first = send(url, '/single', { key, body: { ref, holdMs: 1500 } });
    await sleep(300);
    const started = Date.now();
    const dup = await send(url, '/single', { key, body: { ref, holdMs: 1500 } });
    expect(dup.status).toBe(409);
    expect(dup.json().code).toBe(ProblemCode.InProgress);
    const other = await send(url, '/single/lease', { key, body: { ref, holdMs: 1500 } });
    expect(other.status).toBe(409);
    expect(Date.now() - started).toBeLessThan(500);
    expect((await first).status).toBe(201);
    expect(await ledger(ref)).toEqual(['succeeded']);
  });

  it('a single-commit claimer refuses at once while a claim of the other mode holds the scope', async () => {
    const key = randomUUID();
    const ref = randomUUID();
    const lease = send(url, '/single/lease', { key, body: { ref, holdMs: 1000 } });
    await sleep(300);
    const started = Date.now();
    const res = await send(url, '/single', { key, body: { ref } });
    expect(res.status).toBe(409);
    expect(Date.now() - started).toBeLessThan(500);
    expect(await ledger(ref)).toEqual([]);
    expect((await lease).status).toBe(201);
  });

  it('commits a business failure (402) with its writes and replays it', async () => {
    const key = randomUUID();
    const ref = randomUUID();
    const first = await send(url, '/single', { key, body: { ref, then: 'decline' } });
    expect(first.status).toBe(402);
    const again = await send(url, '/single', { key, body: { ref, then: 'decline' } });
    expect(again.status).toBe(402);
    expect(again.body.equals(first.body)).toBe(true);
    expect(await ledger(ref)).toEqual(['declined']);
  });

  it('takes over an expired record and an abandoned claim, archiving each', async () => {
    for (const [status, stale] of [
      ['completed', `status_code = 201, expires_at = now() - interval '1 second'`],
      [
        'in_progress',
        `owner_token = gen_random_uuid(), locked_until = now() - interval '1 second'`,
      ],
    ]) {
      const key = randomUUID();
      const [{ id: oldId }] = await db.dataSource.query(
        `INSERT INTO idempotency_keys (idempotency_key, endpoint, request_hash, status)
         VALUES ($1, 'ledger', repeat('0', 64), $2) RETURNING id`,
        [key, status],
      );
      await db.dataSource.query(`UPDATE idempotency_keys SET ${stale} WHERE id = $1`, [oldId]);
      const ref = randomUUID();
      expect((await send(url, '/single', { key, body: { ref } })).status).toBe(201);
      expect(await ledger(ref)).toEqual(['succeeded']);
      const now = await record(key);
      expect(now).toMatchObject({ status: 'completed', status_code: 201 });
      expect(now.id).not.toBe(oldId);
      expect((await archived(key)).map((r: { id: string }) => r.id)).toEqual([oldId]);
    }
  });

  it('a rolled-back takeover leaves the stale record and the archive as they were', async () => {
    const key = randomUUID();
    const [{ id: oldId }] = await db.dataSource.query(
      `INSERT INTO idempotency_keys (idempotency_key, endpoint, request_hash, status, status_code, expires_at)
       VALUES ($1, 'ledger', repeat('0', 64), 'completed', 201, now() - interval '1 second') RETURNING id`,
      [key],
    );
    const ref = randomUUID();
    expect((await send(url, '/single', { key, body: { ref, then: 'throw' } })).status).toBe(500);
    expect((await record(key)).id).toBe(oldId);
    expect(await archived(key)).toEqual([]);
  });

  it('leaves nothing when the connection dies mid-handler: 503, and the retry runs at once', async () => {
    const key = randomUUID();
    const ref = randomUUID();
    const res = await send(url, '/single', { key, body: { ref, then: 'kill-connection' } });
    expect(res.status).toBe(503);
    expect(await ledger(ref)).toEqual([]);
    expect(await record(key)).toBeUndefined();
    expect((await send(url, '/single', { key, body: { ref } })).status).toBe(201);
    expect(await ledger(ref)).toEqual(['succeeded']);
  });

  it('rolls back when a record of the scope appeared meanwhile: 503, that record stays', async () => {
    const key = randomUUID();
    const ref = randomUUID();
    const res = await send(url, '/single', { key, body: { ref, then: 'race' } });
    expect(res.status).toBe(503);
    expect(await ledger(ref)).toEqual([]);
    expect(await record(key)).toMatchObject({ status: 'completed', request_hash: '0'.repeat(64) });
  });

  it('streams after committing the writes; a failed COMMIT answers 503 before any byte', async () => {
    const ref = randomUUID();
    const ok = await send(url, '/single/stream', { key: randomUUID(), body: { ref } });
    expect(ok.status).toBe(201);
    expect(ok.text).toBe('receipt-1-2');
    expect(
      await db.dataSource.query('SELECT ref FROM deferred_refs WHERE ref = $1', [ref]),
    ).toEqual([{ ref }]);
    const key = randomUUID();
    const bad = randomUUID();
    const res = await send(url, '/single/stream', {
      key,
      body: { ref: bad, then: 'defer-violation' },
    });
    expect(res.status).toBe(503);
    expect(res.text).not.toContain('receipt');
    expect(
      await db.dataSource.query('SELECT ref FROM deferred_refs WHERE ref = $1', [bad]),
    ).toEqual([]);
    expect(await record(key)).toBeUndefined();
  });

  it('an early response (timeout) commits nothing until the handler settles, then records it', async () => {
    const key = randomUUID();
    const ref = randomUUID();
    const early = await send(url, '/single/timeout', { key, body: { ref, holdMs: 600 } });
    expect(early.status).toBe(408);
    // The handler still runs in its open transaction: nothing visible, duplicates refused.
    expect(await ledger(ref)).toEqual([]);
    expect(await record(key)).toBeUndefined();
    expect((await send(url, '/single/timeout', { key, body: { ref } })).status).toBe(409);
    await sleep(900);
    expect(await ledger(ref)).toEqual(['succeeded']);
    expect(await record(key)).toMatchObject({ status: 'completed', status_code: 201 });
  });
});
