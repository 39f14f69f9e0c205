import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, type INestMicroservice, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import {
  ClientProxyFactory,
  MessagePattern,
  NatsRecordBuilder,
  Payload,
  type ClientProxy,
  Transport,
} from '@nestjs/microservices';
import { headers as natsHeaders } from '@nats-io/transport-node';
import { randomUUID } from 'node:crypto';
import { firstValueFrom } from 'rxjs';
import { Idempotent, IdempotencyModule, ProblemCode } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
let runs = 0;

@Controller()
class PaymentsHandler {
  @MessagePattern('payments.create')
  @Idempotent()
  create(@Payload() data: { amount: number }) {
    runs++;
    return { id: `pay_${runs}`, amount: data.amount };
  }

  @MessagePattern('payments.refund')
  @Idempotent({ required: true })
  refund(@Payload() data: { amount: number }) {
    runs++;
    return { run: runs, amount: data.amount };
  }
}

describe('@Idempotent() on NATS message handlers: the key in the message headers', () => {
  let db: MigratedDatabase;
  let server: INestMicroservice;
  let client: ClientProxy;
  // One queue group per run: another test run on the same NATS server never takes our messages.
  const queue = `idempotency-${randomUUID()}`;

  const send = (pattern: string, data: object, headers: Record<string, string> = {}) => {
    const h = natsHeaders();
    for (const [name, value] of Object.entries(headers)) h.set(name, value);
    const record = new NatsRecordBuilder(data).setHeaders(h).build();
    return firstValueFrom(client.send(pattern, record));
  };

  beforeAll(async () => {
    db = await createMigratedDatabase('nats');
    @Module({
      imports: [
        IdempotencyModule.forRoot({ dataSource: db.dataSource, cleanup: { enabled: false } }),
      ],
      controllers: [PaymentsHandler],
    })
    class AppModule {}
    const options = { servers: [NATS_URL], queue };
    server = await NestFactory.createMicroservice(AppModule, {
      transport: Transport.NATS,
      options,
      logger: false,
    });
    await server.listen();
    client = ClientProxyFactory.create({
      transport: Transport.NATS,
      options: { servers: [NATS_URL] },
    });
    await client.connect();
  });

  afterAll(async () => {
    await client?.close();
    await server?.close();
    await db?.drop();
  });

  it('runs once per Idempotency-Key header and replays the same value', async () => {
    const key = randomUUID();
    const before = runs;
    const first = await send('payments.create', { amount: 700 }, { 'Idempotency-Key': key });
    const second = await send('payments.create', { amount: 700 }, { 'Idempotency-Key': key });
    expect(first).toEqual({ id: `pay_${before + 1}`, amount: 700 });
    expect(second).toEqual(first);
    expect(runs).toBe(before + 1);
    const [row] = await db.records('idempotency_key = $1', [key]);
    expect(row).toMatchObject({ endpoint: 'RPC payments.create', status: 'completed' });
  });

  it('the same key with another payload: the mismatch problem, nothing runs', async () => {
    const key = randomUUID();
    await send('payments.create', { amount: 1 }, { 'Idempotency-Key': key });
    const before = runs;
    await expect(
      send('payments.create', { amount: 2 }, { 'Idempotency-Key': key }),
    ).rejects.toMatchObject({ code: ProblemCode.Mismatch, status: 409 });
    expect(runs).toBe(before);
  });

  it('without the header each message runs; a required route refuses it, and a bad key', async () => {
    const before = runs;
    await send('payments.create', { amount: 3 });
    await send('payments.create', { amount: 3 });
    expect(runs).toBe(before + 2);
    await expect(send('payments.refund', { amount: 3 })).rejects.toMatchObject({
      code: ProblemCode.KeyMissing,
    });
    await expect(
      send('payments.refund', { amount: 3 }, { 'Idempotency-Key': 'x'.repeat(300) }),
    ).rejects.toMatchObject({ code: ProblemCode.KeyInvalid });
    expect(runs).toBe(before + 2);
  });

  it('a key header sent twice is refused; a key getRpcKey finds in the payload wins over the header', async () => {
    const before = runs;
    const h = natsHeaders();
    h.append('Idempotency-Key', randomUUID());
    h.append('Idempotency-Key', randomUUID());
    const twice = new NatsRecordBuilder({ amount: 4 }).setHeaders(h).build();
    await expect(firstValueFrom(client.send('payments.create', twice))).rejects.toMatchObject({
      code: ProblemCode.KeyInvalid,
    });
    expect(runs).toBe(before);

    const idempotencyKey = randomUUID();
    const first = await send(
      'payments.create',
      { amount: 5, idempotencyKey },
      { 'Idempotency-Key': randomUUID() },
    );
    const second = await send(
      'payments.create',
      { amount: 5, idempotencyKey },
      { 'Idempotency-Key': randomUUID() },
    );
    expect(second).toEqual(first);
    expect(runs).toBe(before + 1);
    expect(await db.records('idempotency_key = $1', [idempotencyKey])).toHaveLength(1);
  });

  it('concurrent duplicates on one key: one run, the others get the replay or in-progress', async () => {
    const key = randomUUID();
    const before = runs;
    const outcomes = await Promise.allSettled(
      Array.from({ length: 8 }, () =>
        send('payments.create', { amount: 9 }, { 'Idempotency-Key': key }),
      ),
    );
    expect(runs).toBe(before + 1);
    for (const outcome of outcomes) {
      if (outcome.status === 'fulfilled') {
        expect(outcome.value).toEqual({ id: `pay_${before + 1}`, amount: 9 });
      } else {
        expect(outcome.reason).toMatchObject({ code: ProblemCode.InProgress });
      }
    }
    expect(await db.records('idempotency_key = $1', [key])).toHaveLength(1);
  });
});
