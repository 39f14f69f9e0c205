/**
 * RabbitMQ with manual acknowledgement, as the NestJS docs set it up (`noAck: false`, the handler
 * acks through `context.getChannelRef()`), at `prefetchCount: 1`. A duplicate answered without
 * its handler was never acked, and the consumer was given no other message (helper-56). With
 * `onRpcWithoutHandler` the app settles those messages; the handler's runs are not reported.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, type INestMicroservice, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import {
  type ClientProxy,
  ClientProxyFactory,
  Ctx,
  MessagePattern,
  Payload,
  RmqContext,
  Transport,
} from '@nestjs/microservices';
import { randomUUID } from 'node:crypto';
import { firstValueFrom, timeout } from 'rxjs';
import {
  Idempotent,
  IdempotencyModule,
  ProblemCode,
  type RpcWithoutHandlerEvent,
} from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { Executions } from '../fixtures/payments.fixture.js';

const RMQ_URL = process.env.RMQ_URL ?? 'amqp://127.0.0.1:5672';
const exec = new Executions();
const reported: { outcome: string; code?: string; amount: number }[] = [];

@Controller()
class PaymentsHandler {
  @MessagePattern('payments.create')
  @Idempotent()
  create(@Payload() data: { amount: number }, @Ctx() context: RmqContext) {
    context.getChannelRef().ack(context.getMessage());
    return { amount: data.amount, run: exec.hit('create') };
  }
}

/** The docs' example: a duplicate answered is acked; a message that could not be checked is requeued. */
function settle({ data, context, outcome, code }: RpcWithoutHandlerEvent) {
  reported.push({ outcome, code, amount: data.amount });
  const channel = (context as RmqContext).getChannelRef();
  if (code === ProblemCode.StoreUnavailable) channel.nack(context.getMessage());
  else channel.ack(context.getMessage());
}

describe('@Idempotent() on RabbitMQ with manual acks (noAck: false, prefetchCount: 1)', () => {
  let db: MigratedDatabase;
  let server: INestMicroservice;
  let client: ClientProxy;
  const queue = `idem-ack-${randomUUID()}`;
  const send = (data: object) =>
    firstValueFrom(client.send('payments.create', data).pipe(timeout(5000)));

  beforeAll(async () => {
    db = await createMigratedDatabase('e13rmq');
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          dataSource: db.dataSource,
          cleanup: { enabled: false },
          onRpcWithoutHandler: settle,
        }),
      ],
      controllers: [PaymentsHandler],
    })
    class AppModule {}
    const queueOptions = { durable: false, autoDelete: true };
    server = await NestFactory.createMicroservice(AppModule, {
      transport: Transport.RMQ,
      options: { urls: [RMQ_URL], queue, noAck: false, prefetchCount: 1, queueOptions },
      logger: false,
    });
    await server.listen();
    client = ClientProxyFactory.create({
      transport: Transport.RMQ,
      options: { urls: [RMQ_URL], queue, queueOptions },
    });
    await client.connect();
  });
  afterAll(async () => {
    await client?.close();
    await server?.close();
    await db?.drop();
  });

  it('acks a replayed duplicate through the hook: the next message is delivered', async () => {
    const key = randomUUID();
    const first = await send({ idempotencyKey: key, amount: 10 });
    const replay = await send({ idempotencyKey: key, amount: 10 });
    const next = await send({ idempotencyKey: randomUUID(), amount: 20 });
    expect(replay).toEqual(first);
    expect(next).toMatchObject({ amount: 20 });
    expect(exec.count('create')).toBe(2);
    expect(reported).toEqual([{ outcome: 'replayed', amount: 10 }]);
  });

  it('reports a refusal with its code, and the consumer goes on', async () => {
    reported.length = 0;
    const key = randomUUID();
    await send({ idempotencyKey: key, amount: 30 });
    const other = await send({ idempotencyKey: key, amount: 31 }).catch((err: unknown) => err);
    const next = await send({ idempotencyKey: randomUUID(), amount: 32 });
    expect(other).toMatchObject({ code: ProblemCode.Mismatch });
    expect(next).toMatchObject({ amount: 32 });
    expect(reported).toEqual([{ outcome: 'refused', code: ProblemCode.Mismatch, amount: 31 }]);
  });

  it('reports nothing for messages the handler ran, nor for a message without a key', async () => {
    reported.length = 0;
    const before = exec.count('create');
    await send({ idempotencyKey: randomUUID(), amount: 40 });
    await send({ amount: 41 });
    expect(exec.count('create')).toBe(before + 2);
    expect(reported).toEqual([]);
  });
});
