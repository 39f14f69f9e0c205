import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, type INestMicroservice, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import {
  ClientProxyFactory,
  MessagePattern,
  Payload,
  type ClientProxy,
  type TcpOptions,
  Transport,
} from '@nestjs/microservices';
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import { firstValueFrom } from 'rxjs';
import { Idempotent, IdempotencyModule, ProblemCode } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';

let runs = 0;

@Controller()
class PaymentsHandler {
  @MessagePattern('payments.create')
  @Idempotent()
  create(@Payload() data: { amount: number; idempotencyKey?: string }) {
    runs++;
    return { id: `pay_${runs}`, amount: data.amount, run: runs };
  }

  @MessagePattern('payments.header')
  @Idempotent({ required: true })
  header(@Payload() data: { amount: number; meta?: { key?: string } }) {
    runs++;
    return { run: runs, amount: data.amount };
  }
}

/** A free port: TCP microservices do not report the port they bound. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  return port;
}

describe('@Idempotent() on microservice (TCP) message handlers', () => {
  let db: MigratedDatabase;
  let server: INestMicroservice;
  let client: ClientProxy;
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
        }),
      ],
      controllers: [PaymentsHandler],
    })
    class AppModule {}
    const address = { host: '127.0.0.1', port: await freePort() };
    const options: TcpOptions = { transport: Transport.TCP, options: address };
    server = await NestFactory.createMicroservice(AppModule, { ...options, logger: false });
    await server.listen();
    client = ClientProxyFactory.create({ transport: Transport.TCP, options: address });
    await client.connect();
  });

  afterAll(async () => {
    await client?.close();
    await server?.close();
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
});
