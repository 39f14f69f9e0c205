import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Module } from '@nestjs/common';
import { MessagePattern, Payload, type ClientProxy } from '@nestjs/microservices';
import { randomUUID } from 'node:crypto';
import { EMPTY, firstValueFrom, from, Observable, toArray } from 'rxjs';
import { Idempotent, IdempotencyModule, ProblemCode } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { sendTcpMessage } from '../fixtures/tcp-message.js';
import { startTcpMicroservice } from '../fixtures/tcp-microservice.js';

let runs = 0;
const cycle = () => {
  const p: Record<string, unknown> = { id: 'pay_cycle' };
  p.account = { payments: [p] };
  return p;
};

@Controller()
class PaymentsHandler {
  @MessagePattern('payments.create')
  @Idempotent()
  create(@Payload() data: { amount: number; idempotencyKey?: string }) {
    runs++;
    return { id: `pay_${runs}`, amount: data.amount, run: runs };
  }

  @MessagePattern({ cmd: 'charge', v: 1 })
  @Idempotent()
  charge(@Payload() data: { amount: number; tenant?: string }) {
    runs++;
    return { run: runs, amount: data.amount, tenant: data.tenant ?? null };
  }

  /** What JSON cannot carry, after the operation ran. */
  @MessagePattern('payments.unencodable')
  @Idempotent()
  unencodable(@Payload() data: { kind: 'bigint' | 'cycle' }) {
    runs++;
    return data.kind === 'bigint' ? { amount: 10n ** 20n } : cycle();
  }

  /** A stream of values: the caller gets each of them. */
  @MessagePattern('payments.stream')
  @Idempotent()
  stream(@Payload() data: { amount: number }) {
    runs++;
    return from([1, 2, 3].map((part) => ({ part, amount: data.amount })));
  }

  /** Charges, sends the receipt, then fails (a follow-up step): found by helper-62. */
  @MessagePattern('payments.chargeThenFail')
  @Idempotent()
  chargeThenFail(@Payload() data: { amount: number }) {
    return new Observable((subscriber) => {
      runs++;
      subscriber.next({ charged: data.amount });
      setTimeout(() => subscriber.error(new Error('receipt e-mail failed')), 20);
    });
  }

  /** An operation that answers nothing: the caller's observable completes without a value. */
  @MessagePattern('payments.silent')
  @Idempotent()
  silent() {
    runs++;
    return EMPTY;
  }

  /** `Promise<void>`: Nest's transports send its `undefined` as no value at all. */
  @MessagePattern('payments.settle')
  @Idempotent()
  async settle() {
    await new Promise((resolve) => setImmediate(resolve));
    runs++;
  }

  @MessagePattern('payments.header')
  @Idempotent({ required: true })
  header(@Payload() data: { amount: number; meta?: { key?: string } }) {
    runs++;
    return { run: runs, amount: data.amount };
  }
}

/** `@Idempotent()` on the class: every message handler of it is protected. */
@Idempotent()
@Controller()
class ClassLevelHandler {
  @MessagePattern('refunds.create')
  refund(@Payload() data: { amount: number }) {
    runs++;
    return { run: runs, amount: data.amount };
  }
}

async function until(condition: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('condition not met in 20 s');
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('@Idempotent() on microservice (TCP) message handlers', () => {
  let db: MigratedDatabase;
  let client: ClientProxy;
  let port: number;
  let close: () => Promise<void>;
  const send = (pattern: string, data: object) => firstValueFrom(client.send(pattern, data));

  beforeAll(async () => {
    db = await createMigratedDatabase('rpc');
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          dataSource: db.dataSource,
          cleanup: { enabled: false },
          getRpcKey: (data: { idempotencyKey?: string; meta?: { key?: string } }) =>
            data?.idempotencyKey ?? data?.meta?.key,
          getRpcUserId: (data: { tenant?: unknown }) => data?.tenant as string | undefined,
        }),
      ],
      controllers: [PaymentsHandler, ClassLevelHandler],
    })
    class AppModule {}
    ({ client, port, close } = await startTcpMicroservice(AppModule));
  });
  afterAll(async () => {
    await close?.();
    await db?.drop();
  });

  it('runs a handler once per key and replays the same value', async () => {
    const idempotencyKey = randomUUID();
    const before = runs;
    const first = await send('payments.create', { amount: 700, idempotencyKey });
    const second = await send('payments.create', { amount: 700, idempotencyKey });
    expect(first).toEqual({ id: `pay_${before + 1}`, amount: 700, run: before + 1 });
    expect(second).toEqual(first);
    expect(runs).toBe(before + 1);
    const [row] = await db.records('idempotency_key = $1', [idempotencyKey]);
    expect(row).toMatchObject({ endpoint: 'RPC payments.create', status: 'completed' });
  });

  it('a class-level @Idempotent() protects its message handlers (they ran unprotected before)', async () => {
    const idempotencyKey = randomUUID();
    const before = runs;
    const first = await send('refunds.create', { amount: 3, idempotencyKey });
    expect(await send('refunds.create', { amount: 3, idempotencyKey })).toEqual(first);
    expect(runs).toBe(before + 1);
  });

  it('passes every value of a stream on, and completes its key without a response', async () => {
    const before = runs;
    const idempotencyKey = randomUUID();
    const values = await firstValueFrom(
      client.send('payments.stream', { amount: 5, idempotencyKey }).pipe(toArray()),
    );
    expect(values).toEqual([1, 2, 3].map((part) => ({ part, amount: 5 })));
    const retry = await sendTcpMessage(port, 'payments.stream', { amount: 5, idempotencyKey });
    expect(retry.err).toMatchObject({ code: ProblemCode.NotReplayable, original_status: 200 });
    expect(runs).toBe(before + 1);
  });

  it('a stream that fails after its receipt: the caller gets the receipt, a retry never charges again', async () => {
    const before = runs;
    const idempotencyKey = randomUUID();
    const receipt = await firstValueFrom(
      client.send('payments.chargeThenFail', { amount: 7, idempotencyKey }),
    );
    expect(receipt).toEqual({ charged: 7 });
    await until(async () => (await db.records('idempotency_key = $1', [idempotencyKey]))[0]?.status === 'completed'); // prettier-ignore
    const retry = await sendTcpMessage(port, 'payments.chargeThenFail', { amount: 7, idempotencyKey }); // prettier-ignore
    expect(retry.err).toMatchObject({ code: ProblemCode.NotReplayable, original_status: 200 });
    expect(runs).toBe(before + 1);
  });

  it.each(['payments.silent', 'payments.settle'])(
    'a handler that answers nothing (%s): its retry answers nothing too, without a second run',
    async (pattern) => {
      const before = runs;
      const idempotencyKey = randomUUID();
      const call = () => firstValueFrom(client.send(pattern, { idempotencyKey }).pipe(toArray()));
      expect(await call()).toEqual([]);
      expect(await call()).toEqual([]);
      expect(runs).toBe(before + 1);
      const [row] = await db.records('idempotency_key = $1', [idempotencyKey]);
      // EMPTY is stored as 200, a Promise<void>'s one undefined as 204: each replayed as it was.
      const statusCode = pattern === 'payments.silent' ? 200 : 204;
      expect(row).toMatchObject({
        status: 'completed',
        status_code: statusCode,
        response_body: null,
      });
      expect(row.response_raw).toEqual(Buffer.alloc(0));
    },
  );

  it('the same key with another payload: an RpcException carrying the problem code', async () => {
    const idempotencyKey = randomUUID();
    await send('payments.create', { amount: 1, idempotencyKey });
    const before = runs;
    await expect(send('payments.create', { amount: 2, idempotencyKey })).rejects.toMatchObject({
      code: ProblemCode.Mismatch,
      status: 409,
    });
    expect(runs).toBe(before);
  });

  it('getRpcKey reads the key where the app puts it; required refuses a message without one', async () => {
    const key = randomUUID();
    const before = runs;
    const first = await send('payments.header', { amount: 5, meta: { key } });
    expect(await send('payments.header', { amount: 5, meta: { key } })).toEqual(first);
    expect(runs).toBe(before + 1);
    await expect(send('payments.header', { amount: 5 })).rejects.toMatchObject({
      code: ProblemCode.KeyMissing,
    });
    await expect(send('payments.header', { amount: 5, meta: { key: 42 } })).rejects.toMatchObject({
      code: ProblemCode.KeyInvalid,
    });
    expect(runs).toBe(before + 1);
  });

  it('one object pattern however its keys are ordered or spaced: one scope, one run', async () => {
    const idempotencyKey = randomUUID();
    const before = runs;
    const patterns = [
      '{"cmd":"charge","v":1}',
      '{"v":1,"cmd":"charge"}',
      '{ "cmd" : "charge", "v": 1 }',
    ];
    const replies = [];
    for (const pattern of patterns) {
      replies.push(await sendTcpMessage(port, pattern, { amount: 3, idempotencyKey }));
    }
    expect(replies.map((r) => r.response)).toEqual(
      Array(3).fill({ run: before + 1, amount: 3, tenant: null }),
    );
    expect(runs).toBe(before + 1);
    const rows = await db.records('idempotency_key = $1', [idempotencyKey]);
    expect(rows.map((r) => r.endpoint)).toEqual(['RPC {"cmd":"charge","v":1}']);
  });

  it('getRpcUserId scopes keys per user, as getUserId does for HTTP', async () => {
    const idempotencyKey = randomUUID();
    const pattern = { cmd: 'charge', v: 1 };
    const before = runs;
    const a = await send(pattern as never, { amount: 4, tenant: 'acme', idempotencyKey });
    const b = await send(pattern as never, { amount: 4, tenant: 'globex', idempotencyKey });
    expect(await send(pattern as never, { amount: 4, tenant: 'acme', idempotencyKey })).toEqual(a);
    expect([a, b]).toEqual([
      { run: before + 1, amount: 4, tenant: 'acme' },
      { run: before + 2, amount: 4, tenant: 'globex' },
    ]);
    const rows = await db.records('idempotency_key = $1', [idempotencyKey]);
    expect(rows.map((r) => r.user_id).sort()).toEqual(['acme', 'globex']);
    await expect(
      send(pattern as never, { amount: 4, tenant: { id: 1 }, idempotencyKey: randomUUID() }),
    ).rejects.toMatchObject({ code: ProblemCode.Misconfigured });
  });

  it.each(['bigint', 'cycle'] as const)(
    'a returned value JSON cannot hold (%s): the handler never runs again, retries say not replayable',
    async (kind) => {
      const idempotencyKey = randomUUID();
      const before = runs;
      const heap = process.memoryUsage().heapUsed;
      // Nest's TCP server cannot serialize the reply either: the first caller gets none.
      void sendTcpMessage(port, 'payments.unencodable', { kind, idempotencyKey }).catch(
        () => undefined,
      );
      await until(
        async () =>
          (await db.records('idempotency_key = $1', [idempotencyKey]))[0]?.status === 'completed',
      );
      const retry = await sendTcpMessage(port, 'payments.unencodable', { kind, idempotencyKey });
      expect(retry.err).toMatchObject({
        code: ProblemCode.NotReplayable,
        original_status: 200,
      });
      expect(runs).toBe(before + 1);
      expect(process.memoryUsage().heapUsed - heap).toBeLessThan(200 * 1024 * 1024);
      const [row] = await db.records('idempotency_key = $1', [idempotencyKey]);
      expect(row).toMatchObject({ status: 'completed', response_body: null, status_code: 200 });
    },
  );
});
