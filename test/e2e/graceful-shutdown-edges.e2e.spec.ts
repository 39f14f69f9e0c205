/**
 * Graceful shutdown, found by helper-61: a claim still on its way to PostgreSQL when the shutdown
 * looked was not counted as in flight (the module closed its DataSource, the claim committed, the
 * handler charged, its completion failed, and the retry after the lease charged again); two apps
 * of one process sharing the DataSource the module initialized (the first to close cut the
 * other's run, and so did one app closed twice: found by helper-63); and the two waits (before
 * and after the microservices close) could each take the whole bound.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import {
  ClientProxyFactory,
  EventPattern,
  MessagePattern,
  type MicroserviceOptions,
  Payload,
  Transport,
} from '@nestjs/microservices';
import { randomUUID } from 'node:crypto';
import { firstValueFrom } from 'rxjs';
import type { DataSource } from 'typeorm';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { freePort } from '../fixtures/free-port.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { Executions } from '../fixtures/payments.fixture.js';
import { startTcpMicroservice } from '../fixtures/tcp-microservice.js';

const exec = new Executions();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const keyOf = (data: unknown) => (data as { idempotencyKey: string }).idempotencyKey;

@Controller()
class Charges {
  @EventPattern('charge')
  @Idempotent()
  async charge(@Payload() data: unknown) {
    exec.hit('charged', keyOf(data));
  }

  @MessagePattern('charge.msg')
  @Idempotent()
  async chargeMessage(@Payload() data: unknown) {
    exec.hit('charged', keyOf(data));
    return { id: 'ch_1' };
  }

  @MessagePattern('charge.slow')
  @Idempotent()
  async chargeSlowly(@Payload() data: unknown) {
    await sleep((data as { ms: number }).ms);
    exec.hit('charged', keyOf(data));
    return { id: 'ch_2' };
  }
}

let db: MigratedDatabase;
beforeAll(async () => {
  db = await createMigratedDatabase('shutdown_edges');
});
afterAll(() => db?.drop());

function appModule(dataSource: DataSource = db.newDataSource()) {
  @Module({
    imports: [IdempotencyModule.forRoot({ dataSource, cleanup: { enabled: false }, leaseSeconds: 2 })], // prettier-ignore
    controllers: [Charges],
  })
  class AppModule {}
  return AppModule;
}

const status = async (key: string) => (await db.records('idempotency_key = $1', [key]))[0]?.status; // prettier-ignore

/** The key's retry, from a new app once the lease has ended: it must not charge again. */
async function retryAfterLease(pattern: string, key: string): Promise<void> {
  await sleep(2500);
  const again = await startTcpMicroservice(appModule());
  const data = { idempotencyKey: key, ms: 0 };
  if (pattern === 'charge') await firstValueFrom(again.client.emit(pattern, data));
  else await firstValueFrom(again.client.send(pattern, data)).catch((err: unknown) => err);
  await sleep(500);
  await again.close();
}

it.each(['charge', 'charge.msg'])(
  '%s: a claim on its way at shutdown is waited for; the key ends completed and the retry does not charge',
  async (pattern) => {
    const key = randomUUID();
    const tcp = await startTcpMicroservice(appModule());
    const locker = db.dataSource.createQueryRunner();
    await locker.connect();
    await locker.startTransaction();
    await locker.query('LOCK TABLE idempotency_keys IN SHARE ROW EXCLUSIVE MODE');
    const sent =
      pattern === 'charge'
        ? firstValueFrom(tcp.client.emit(pattern, { idempotencyKey: key }))
        : firstValueFrom(tcp.client.send(pattern, { idempotencyKey: key })).catch((err: unknown) => err); // prettier-ignore
    await sleep(200); // the message is in; its claim waits on the lock
    const closed = tcp.server.close();
    await sleep(300);
    await locker.commitTransaction();
    await locker.release();
    await closed;
    await sent;
    await tcp.client.close();
    expect({ charged: exec.count('charged', key), status: await status(key) }).toEqual({
      charged: 1,
      status: 'completed',
    });
    await retryAfterLease(pattern, key);
    expect(exec.count('charged', key)).toBe(1);
  },
  20_000,
);

describe('two apps of one process on the DataSource the module initialized', () => {
  async function start() {
    const AppModule = appModule(db.newDataSource());
    const http = await NestFactory.create(AppModule, { logger: false });
    await http.listen(0, '127.0.0.1');
    const options = { host: '127.0.0.1', port: await freePort() };
    const ms = await NestFactory.createMicroservice<MicroserviceOptions>(AppModule, {
      transport: Transport.TCP,
      options,
      logger: false,
    });
    await ms.listen();
    const client = ClientProxyFactory.create({ transport: Transport.TCP, options });
    await client.connect();
    return { http, ms, client };
  }

  it.each(['the HTTP app first', 'both at once'])(
    'closing %s does not cut the other app’s run',
    async (order) => {
      const key = randomUUID();
      const apps = await start();
      const data = { idempotencyKey: key, ms: 800 };
      const sent = firstValueFrom(apps.client.send('charge.slow', data)).catch((err: unknown) => err); // prettier-ignore
      await sleep(200);
      if (order === 'both at once') await Promise.all([apps.http.close(), apps.ms.close()]);
      else await apps.http.close().then(() => apps.ms.close());
      await sent; // Nest's TCP server closes its sockets first: the reply may be cut, not the run
      await apps.client.close();
      expect(await status(key)).toBe('completed');
      await retryAfterLease('charge.slow', key);
      expect(exec.count('charged', key)).toBe(1);
    },
    20_000,
  );
  it('closing the HTTP app twice (an explicit close, then SIGTERM) leaves the other app’s DataSource open', async () => {
    const apps = await start();
    await apps.http.close();
    await apps.http.close();
    const key = randomUUID();
    const data = { idempotencyKey: key, ms: 0 };
    expect(await firstValueFrom(apps.client.send('charge.slow', data))).toEqual({ id: 'ch_2' });
    expect(await status(key)).toBe('completed');
    await apps.client.close();
    await apps.ms.close();
  });
});

it('the shutdown waits at most its bound in all, not once before and again after the microservices close', async () => {
  const tcp = await startTcpMicroservice(appModule());
  const sent = firstValueFrom(tcp.client.send('charge.slow', { idempotencyKey: randomUUID(), ms: 5000 })).catch((err: unknown) => err); // prettier-ignore
  await sleep(300);
  const t0 = performance.now();
  await tcp.server.close();
  const closeMs = performance.now() - t0;
  await sent;
  await tcp.client.close();
  await sleep(5000); // the handler ends before the database is dropped
  expect(closeMs).toBeGreaterThan(1500); // the bound: the 2 s lease
  expect(closeMs).toBeLessThan(3500);
}, 20_000);
