/**
 * RabbitMQ with manual acknowledgement, as the NestJS docs set it up (`noAck: false`, handlers
 * ack the message). A duplicate answered without its handler was never acked, and at
 * `prefetchCount` such messages the consumer was given no other (helper-56). With
 * `onRpcWithoutHandler` and the docs' `settleOnce`, every message is settled once: also with two
 * handlers of one event, and with an app's retry() that runs a reported message's handler after
 * all (helper-57: both acked twice, and RabbitMQ closed the channel).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  type CallHandler,
  Controller,
  Injectable,
  Module,
  type NestInterceptor,
} from '@nestjs/common';
import { APP_INTERCEPTOR, NestFactory } from '@nestjs/core';
import {
  type ClientProxy,
  ClientProxyFactory,
  Ctx,
  EventPattern,
  MessagePattern,
  Payload,
  RmqContext,
  Transport,
} from '@nestjs/microservices';
import { randomUUID } from 'node:crypto';
import { firstValueFrom, retry, timeout, timer } from 'rxjs';
import {
  Idempotent,
  IdempotencyModule,
  ProblemCode,
  type RpcWithoutHandlerEvent,
} from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { Executions } from '../fixtures/payments.fixture.js';
import { TcpProxy } from '../fixtures/tcp-proxy.js';
import { DataSource } from 'typeorm';

const RMQ_URL = process.env.RMQ_URL ?? 'amqp://127.0.0.1:5672';
const exec = new Executions();
const reported: { outcome: string; code?: string; handler: string; amount: number; kind: string }[] = []; // prettier-ignore
/** Each settle by delivery tag and channel: a second one of a message would close the channel. */
const settles = new Map<string, string[]>();
const channelErrors: string[] = [];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The docs' helper: a message is acked (or requeued) once, whoever asks. */
const settled = new WeakSet<object>();
function settleOnce(context: RmqContext, { requeue = false } = {}, by = 'handler') {
  const message = context.getMessage() as { fields: { deliveryTag: number } };
  const channel = context.getChannelRef() as {
    ack(m: object): void;
    nack(m: object, all: boolean, requeue: boolean): void;
    on(event: string, listener: (err: Error) => void): void;
  };
  if (!settled.has(channel)) channel.on('error', (err) => channelErrors.push(err.message));
  settled.add(channel);
  if (settled.has(message)) return;
  settled.add(message);
  const tag = `${message.fields.deliveryTag}`;
  settles.set(tag, [...(settles.get(tag) ?? []), by]);
  try {
    if (requeue) channel.nack(message, false, true);
    else channel.ack(message);
  } catch {
    // The channel closed (the consumer's shutdown): the broker redelivers it.
  }
}

/** The docs' hook: an undecided event is requeued after a pause; everything else is acked. */
function onRpcWithoutHandler(event: RpcWithoutHandlerEvent) {
  const { data, context, kind, outcome, code, handler } = event;
  reported.push({ outcome, code, handler, amount: data.amount, kind });
  if (!(context instanceof RmqContext)) return;
  const undecided = code === ProblemCode.InProgress || code === ProblemCode.StoreUnavailable;
  if (kind === 'event' && undecided)
    setTimeout(() => settleOnce(context as RmqContext, { requeue: true }, 'hook'), 1000);
  else settleOnce(context as RmqContext, {}, 'hook');
}

@Controller()
class PaymentsHandler {
  @MessagePattern('payments.create')
  @Idempotent()
  create(@Payload() data: { amount: number }, @Ctx() context: RmqContext) {
    settleOnce(context);
    return { amount: data.amount, run: exec.hit('create') };
  }
}

@Controller()
class BillingHandler {
  @EventPattern('order.created')
  @Idempotent()
  onOrder(@Payload() _data: unknown, @Ctx() context: unknown) {
    exec.hit('billing');
    settleOnce(context as RmqContext);
  }
}

@Controller()
class AuditHandler {
  @EventPattern('order.created')
  @Idempotent()
  onOrder(@Payload() _data: unknown) {
    exec.hit('audit');
  }
}

@Controller()
class ShippingHandler {
  @EventPattern('order.paid')
  @Idempotent()
  onPaid(@Payload() _data: unknown, @Ctx() context: unknown) {
    exec.hit('shipping');
    settleOnce(context as RmqContext);
  }
}

@Controller()
class RefundsHandler {
  @EventPattern('order.refunded')
  @Idempotent()
  onRefund(@Payload() _data: unknown, @Ctx() context: unknown) {
    exec.hit('refunds');
    settleOnce(context as RmqContext);
    // What an ORM returns, an entity whose relation points back at it: JSON cannot hold it, so
    // it is recorded without a body, and a duplicate is refused (not replayable).
    const refund: Record<string, unknown> = { id: 1 };
    refund.order = { id: 7, refunds: [refund] };
    return refund;
  }
}

@Controller()
class RefundLedgerHandler {
  @EventPattern('order.refunded')
  @Idempotent()
  async onRefund(@Payload() _data: unknown) {
    await sleep(30);
    exec.hit('refund-ledger-attempt');
    if (exec.count('refund-ledger-attempt') === 1) throw new Error('ledger unavailable');
    exec.hit('refund-ledger');
  }
}

let ledgerDown = true;

@Controller()
class LedgerHandler {
  @EventPattern('order.paid')
  @Idempotent()
  async onPaid(@Payload() _data: unknown) {
    // The ledger's first attempt fails (its key is freed); a redelivery must run it.
    await sleep(30);
    if (ledgerDown) throw new Error('ledger unavailable');
    exec.hit('ledger');
  }
}

async function startConsumer(
  db: MigratedDatabase,
  controllers: (new () => object)[],
  prefetchCount: number,
  providers: object[] = [],
  dataSource: DataSource = db.dataSource,
) {
  @Module({
    imports: [
      IdempotencyModule.forRoot({
        dataSource,
        cleanup: { enabled: false },
        onRpcWithoutHandler,
      }),
    ],
    controllers,
    providers: providers as never[],
  })
  class AppModule {}
  const queue = `idem-ack-${randomUUID()}`;
  const queueOptions = { durable: false, autoDelete: true };
  const server = await NestFactory.createMicroservice(AppModule, {
    transport: Transport.RMQ,
    options: { urls: [RMQ_URL], queue, noAck: false, prefetchCount, queueOptions },
    logger: false,
  });
  await server.listen();
  const client: ClientProxy = ClientProxyFactory.create({
    transport: Transport.RMQ,
    options: { urls: [RMQ_URL], queue, queueOptions },
  });
  await client.connect();
  const send = (data: object) =>
    firstValueFrom(client.send('payments.create', data).pipe(timeout(5000)));
  const close = async () => {
    await client.close();
    await server.close();
  };
  return { client, send, close };
}

async function until(check: () => boolean, ms = 5000) {
  for (const end = Date.now() + ms; !check() && Date.now() < end;) await sleep(20);
}

describe('@Idempotent() on RabbitMQ with manual acks (noAck: false, prefetchCount: 1)', () => {
  let db: MigratedDatabase;
  let consumer: Awaited<ReturnType<typeof startConsumer>>;

  beforeAll(async () => {
    db = await createMigratedDatabase('e13rmq');
    consumer = await startConsumer(
      db,
      [
        PaymentsHandler,
        BillingHandler,
        AuditHandler,
        ShippingHandler,
        LedgerHandler,
        RefundsHandler,
        RefundLedgerHandler,
      ],
      1,
    );
  });
  afterAll(async () => {
    await consumer?.close();
    await db?.drop();
  });

  it('acks a replayed duplicate through the hook: the next message is delivered', async () => {
    reported.length = 0;
    const key = randomUUID();
    const first = await consumer.send({ idempotencyKey: key, amount: 10 });
    const replay = await consumer.send({ idempotencyKey: key, amount: 10 });
    const next = await consumer.send({ idempotencyKey: randomUUID(), amount: 20 });
    expect(replay).toEqual(first);
    expect(next).toMatchObject({ amount: 20 });
    expect(exec.count('create')).toBe(2);
    expect(reported).toEqual([
      { outcome: 'replayed', handler: 'PaymentsHandler.create', amount: 10, kind: 'message' },
    ]);
  });

  it('reports a refusal with its code, and the consumer goes on', async () => {
    reported.length = 0;
    const key = randomUUID();
    await consumer.send({ idempotencyKey: key, amount: 30 });
    const other = await consumer.send({ idempotencyKey: key, amount: 31 }).catch((e) => e);
    const next = await consumer.send({ idempotencyKey: randomUUID(), amount: 32 });
    expect(other).toMatchObject({ code: ProblemCode.Mismatch });
    expect(next).toMatchObject({ amount: 32 });
    expect(reported).toMatchObject([{ outcome: 'refused', code: ProblemCode.Mismatch }]);
  });

  it('reports nothing for messages the handler ran, nor for a message without a key', async () => {
    reported.length = 0;
    const before = exec.count('create');
    await consumer.send({ idempotencyKey: randomUUID(), amount: 40 });
    await consumer.send({ amount: 41 });
    expect(exec.count('create')).toBe(before + 2);
    expect(reported).toEqual([]);
  });

  it('settles a duplicate event of two handlers once: the channel stays open', async () => {
    reported.length = 0;
    settles.clear();
    const event = { idempotencyKey: randomUUID(), amount: 50 };
    consumer.client.emit('order.created', event);
    await until(() => exec.count('billing') === 1 && exec.count('audit') === 1);
    consumer.client.emit('order.created', event);
    await until(() => reported.length > 0);
    const next = await consumer.send({ idempotencyKey: randomUUID(), amount: 51 });
    expect(next).toMatchObject({ amount: 51 });
    expect([exec.count('billing'), exec.count('audit')]).toEqual([1, 1]);
    // Each handler that answers the duplicate is reported (Nest's forkJoin of an event's
    // handlers may end the other's replay first); the message is acked once either way.
    expect(reported.length).toBeGreaterThan(0);
    for (const r of reported) {
      expect(['AuditHandler.onOrder', 'BillingHandler.onOrder']).toContain(r.handler);
      expect(r.outcome).toBe('replayed');
    }
    expect([...settles.values()].every((by) => by.length === 1)).toBe(true);
    expect(channelErrors).toEqual([]);
  });

  it("runs a handler whose first run failed when the event comes again, beside a sibling's replay", async () => {
    const event = { idempotencyKey: randomUUID(), amount: 60 };
    consumer.client.emit('order.paid', event);
    await until(() => exec.count('shipping') === 1);
    await sleep(200); // the ledger's attempt failed: its key is free again
    ledgerDown = false;
    consumer.client.emit('order.paid', event); // the redelivery (here: sent again)
    await until(() => exec.count('ledger') === 1);
    const next = await consumer.send({ idempotencyKey: randomUUID(), amount: 61 });
    expect(next).toMatchObject({ amount: 61 });
    expect([exec.count('shipping'), exec.count('ledger')]).toEqual([1, 1]);
  });

  it("runs a handler whose first run failed when the event comes again, beside a sibling's refusal", async () => {
    const event = { idempotencyKey: randomUUID(), amount: 70 };
    consumer.client.emit('order.refunded', event);
    await until(() => exec.count('refunds') === 1 && exec.count('refund-ledger-attempt') === 1);
    await sleep(200);
    consumer.client.emit('order.refunded', event); // the refunds handler is refused now
    await until(() => exec.count('refund-ledger') === 1);
    const next = await consumer.send({ idempotencyKey: randomUUID(), amount: 71 });
    expect(next).toMatchObject({ amount: 71 });
    expect([exec.count('refunds'), exec.count('refund-ledger')]).toEqual([1, 1]);
  });
});

@Injectable()
class RetryOnceInterceptor implements NestInterceptor {
  intercept(_context: unknown, next: CallHandler) {
    return next.handle().pipe(retry({ count: 1, delay: () => timer(300) }));
  }
}

let flaky = 0;

@Controller()
class FlakyPaymentsHandler {
  @MessagePattern('payments.create')
  @Idempotent()
  async create(@Payload() data: { amount: number }, @Ctx() context: RmqContext) {
    exec.hit('flaky');
    if (flaky++ === 0) {
      await sleep(250);
      throw new Error('processor timeout'); // transient: the app's retry() runs it again
    }
    settleOnce(context); // on success only: a failed run leaves its message to the retry
    return { amount: data.amount };
  }
}

describe('onRpcWithoutHandler with an app retry() interceptor (prefetchCount: 5)', () => {
  let db: MigratedDatabase;
  let consumer: Awaited<ReturnType<typeof startConsumer>>;

  beforeAll(async () => {
    db = await createMigratedDatabase('e13rmqr');
    const retrying = { provide: APP_INTERCEPTOR, useClass: RetryOnceInterceptor };
    consumer = await startConsumer(db, [FlakyPaymentsHandler], 5, [retrying]);
  });
  afterAll(async () => {
    await consumer?.close();
    await db?.drop();
  });

  it('settles every message once, also one whose failed run is answered by a replay on retry', async () => {
    reported.length = 0;
    settles.clear();
    const key = randomUUID();
    // A runs and fails after 250 ms without settling; B (same key) comes meanwhile: refused in
    // progress (a message: acked by the hook, its caller retries), then its retry runs the
    // handler. A's retry is answered by B's stored result, without the handler: reported, and
    // acked by the hook.
    const a = consumer.send({ idempotencyKey: key, amount: 5 }).catch((e) => e);
    await sleep(100);
    const b = consumer.send({ idempotencyKey: key, amount: 5 }).catch((e) => e);
    expect(await Promise.all([a, b])).toEqual([{ amount: 5 }, { amount: 5 }]);
    const next = await consumer.send({ idempotencyKey: randomUUID(), amount: 6 });
    expect(next).toEqual({ amount: 6 });
    expect(exec.count('flaky')).toBe(3); // A failed, B ran, the next one ran
    const outcomes = reported.map((r) => `${r.outcome} ${r.code ?? ''}`.trim()).sort();
    expect(outcomes).toEqual(['refused request_in_progress', 'replayed']);
    expect(settles.size).toBe(3);
    expect([...settles.values()].every((by) => by.length === 1)).toBe(true);
    expect(channelErrors).toEqual([]);
  });
});

@Injectable()
class TimeoutInterceptor implements NestInterceptor {
  intercept(_context: unknown, next: CallHandler) {
    return next.handle().pipe(timeout(500));
  }
}

describe('a message the library answered, timed out or refused is settled, never run later (prefetchCount: 1)', () => {
  let db: MigratedDatabase;
  let proxy: TcpProxy;
  let dataSource: DataSource;
  let consumer: Awaited<ReturnType<typeof startConsumer>>;

  beforeAll(async () => {
    db = await createMigratedDatabase('e14rmq');
    proxy = TcpProxy.forUrl(db.url);
    await proxy.start();
    dataSource = new DataSource({ type: 'postgres', url: proxy.wrap(db.url) });
    const timing = { provide: APP_INTERCEPTOR, useClass: TimeoutInterceptor };
    consumer = await startConsumer(db, [PaymentsHandler], 1, [timing], dataSource);
  });
  afterAll(async () => {
    await consumer?.close();
    await proxy?.stop();
    await db?.drop();
  });

  /** Holds the records table for `ms`: the key check waits past the app's timeout (500 ms). */
  async function slowDatabase(ms: number) {
    const locker = db.dataSource.createQueryRunner();
    await locker.connect();
    await locker.startTransaction();
    await locker.query('LOCK TABLE idempotency_keys IN ACCESS EXCLUSIVE MODE');
    setTimeout(() => void locker.commitTransaction().then(() => locker.release()), ms);
  }

  it("an app's timeout() while the key is checked: the call still runs and settles, its retry is replayed", async () => {
    // Found by helper-64: the claim was cancelled, nothing ran or settled the message, and it
    // held the only prefetch slot for good.
    reported.length = 0;
    const key = randomUUID();
    const before = exec.count('create');
    await slowDatabase(1000);
    const first = await consumer.send({ idempotencyKey: key, amount: 80 }).catch((e) => e);
    expect(first).toMatchObject({ status: 'error' }); // the app's timeout, as Nest sends it
    await until(() => exec.count('create') === before + 1);
    expect(await consumer.send({ idempotencyKey: key, amount: 80 })).toMatchObject({ amount: 80 });
    expect(exec.count('create')).toBe(before + 1);
    expect(reported).toEqual([
      { outcome: 'replayed', handler: 'PaymentsHandler.create', amount: 80, kind: 'message' },
    ]);
  }, 20_000);

  it('an emit() to a message handler is an event: run despite a timeout, and reported as one', async () => {
    // Found by helper-65: labelled a message, its claim cancelled by the timeout, acked, lost.
    reported.length = 0;
    const key = randomUUID();
    const before = exec.count('create');
    await slowDatabase(1000);
    await firstValueFrom(consumer.client.emit('payments.create', { idempotencyKey: key, amount: 81 })); // prettier-ignore
    await until(() => exec.count('create') === before + 1);
    await firstValueFrom(consumer.client.emit('payments.create', { idempotencyKey: key, amount: 81 })); // prettier-ignore
    await until(() => reported.length === 1);
    expect(exec.count('create')).toBe(before + 1);
    expect(reported).toEqual([
      { outcome: 'replayed', handler: 'PaymentsHandler.create', amount: 81, kind: 'event' },
    ]);
    expect(await consumer.send({ idempotencyKey: randomUUID(), amount: 82 })).toMatchObject({ amount: 82 }); // prettier-ignore
  }, 20_000);

  it('a message refused while PostgreSQL is down is acked: its caller was told, nothing runs later', async () => {
    reported.length = 0;
    const key = randomUUID();
    const before = exec.count('create');
    await proxy.cut();
    const refused = await consumer.send({ idempotencyKey: key, amount: 90 }).catch((e) => e);
    await proxy.restore();
    expect(refused).toMatchObject({ code: ProblemCode.StoreUnavailable });
    await sleep(2500); // a requeued message would have come back and run by now
    expect(exec.count('create')).toBe(before);
    expect(await consumer.send({ idempotencyKey: randomUUID(), amount: 91 })).toMatchObject({ amount: 91 }); // prettier-ignore
    expect(reported.map((r) => `${r.kind} ${r.outcome} ${r.code}`)).toEqual([
      `message refused ${ProblemCode.StoreUnavailable}`,
    ]);
  }, 20_000);
});
