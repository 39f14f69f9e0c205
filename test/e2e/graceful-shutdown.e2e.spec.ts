/**
 * A graceful shutdown (`app.close()`: SIGTERM with `enableShutdownHooks`, a rolling deploy) while
 * a handler runs. The module closed its DataSource under the run, whose completion then failed:
 * the key stayed in progress until its lease ended, and the retry ran the handler again, a second
 * charge (helper-59, on events and message handlers). The shutdown now waits for runs in flight.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, Get, Module, Post } from '@nestjs/common';
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
import request from 'supertest';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { Executions } from '../fixtures/payments.fixture.js';
import { startTcpMicroservice } from '../fixtures/tcp-microservice.js';
import { freePort } from '../fixtures/free-port.js';

const exec = new Executions();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

@Controller()
class Charges {
  @EventPattern('charge')
  @Idempotent()
  async charge(@Payload() d: { idempotencyKey: string }) {
    await sleep(800);
    exec.hit('charged', d.idempotencyKey);
  }

  @MessagePattern('charge.msg')
  @Idempotent()
  async chargeMessage(@Payload() d: { idempotencyKey: string }) {
    await sleep(800);
    exec.hit('charged', d.idempotencyKey);
    return { id: 'ch_1' };
  }

  /** An ordinary slow route, not idempotent: the HTTP server waits for it while closing. */
  @Get('report')
  async report() {
    await sleep(1500);
    return { ok: true };
  }

  @Post('charges')
  @Idempotent()
  async chargeHttp(@Body() body: { key: string }) {
    await sleep(800);
    exec.hit('charged', body.key);
    return { id: 'ch_1' };
  }
}

describe('a graceful shutdown while a handler runs', () => {
  let db: MigratedDatabase;

  beforeAll(async () => {
    db = await createMigratedDatabase('e13shut');
  });
  afterAll(async () => {
    await db?.drop();
  });

  /** An app module whose DataSource the library initializes, and so closes at shutdown. */
  function appModule() {
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          dataSource: db.newDataSource(),
          cleanup: { enabled: false },
          leaseSeconds: 2,
        }),
      ],
      controllers: [Charges],
    })
    class AppModule {}
    return AppModule;
  }

  async function status(key: string): Promise<string | undefined> {
    return (await db.records('idempotency_key = $1', [key]))[0]?.status as string | undefined;
  }

  it.each(['charge', 'charge.msg'])(
    'records the run of %s before closing; the message again after the lease is answered, not run',
    async (pattern) => {
      const key = randomUUID();
      const tcp = await startTcpMicroservice(appModule());
      const first =
        pattern === 'charge'
          ? firstValueFrom(tcp.client.emit(pattern, { idempotencyKey: key }))
          : firstValueFrom(tcp.client.send(pattern, { idempotencyKey: key })).catch((e) => e);
      await sleep(200);
      await tcp.close();
      await first;
      expect(await status(key)).toBe('completed');
      await sleep(2500); // past the lease: an in-progress record would now be taken over
      const again = await startTcpMicroservice(appModule());
      if (pattern === 'charge')
        await firstValueFrom(again.client.emit(pattern, { idempotencyKey: key }));
      else await firstValueFrom(again.client.send(pattern, { idempotencyKey: key }));
      await sleep(1200);
      await again.close();
      expect(exec.count('charged', key)).toBe(1);
    },
    20_000,
  );

  it('records a message a hybrid app takes after the first wait, before its DataSource closes', async () => {
    // Nest closes a hybrid app's microservices after every beforeApplicationShutdown hook, and
    // after its HTTP server, which waits for the requests in flight (helper-60).
    const port = await freePort();
    const app = await NestFactory.create(appModule(), { logger: false });
    app.connectMicroservice<MicroserviceOptions>({
      transport: Transport.TCP,
      options: { host: '127.0.0.1', port },
    });
    await app.startAllMicroservices();
    await app.listen(0, '127.0.0.1');
    const client = ClientProxyFactory.create({
      transport: Transport.TCP,
      options: { host: '127.0.0.1', port },
    });
    await client.connect();
    const report = request(app.getHttpServer())
      .get('/report')
      .then((r) => r.status);
    await sleep(100);
    const closed = app.close();
    await sleep(900); // nothing idempotent ran at the first wait; the HTTP server still waits
    const key = randomUUID();
    const first = firstValueFrom(client.send('charge.msg', { idempotencyKey: key })).catch(
      (e) => e,
    );
    await closed;
    await Promise.race([first, sleep(1000)]);
    await client.close();
    expect(await report).toBe(200);
    expect(exec.count('charged', key)).toBe(1);
    expect(await status(key)).toBe('completed');
  }, 20_000);

  it('answers an HTTP request in flight and records it before closing', async () => {
    const app = await NestFactory.create(appModule(), { logger: false });
    await app.listen(0, '127.0.0.1');
    const key = randomUUID();
    const pending = request(app.getHttpServer())
      .post('/charges')
      .set('Idempotency-Key', key)
      .send({ key });
    const answered = pending.then((res) => res);
    await sleep(200);
    const closed = app.close();
    const res = await answered;
    await closed;
    expect(res.status).toBe(201);
    expect(await status(key)).toBe('completed');
    expect(exec.count('charged', key)).toBe(1);
  }, 20_000);
});
