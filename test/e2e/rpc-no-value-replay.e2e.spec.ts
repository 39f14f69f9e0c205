/**
 * An RPC handler that answers nothing is replayed as its stream was: nothing for `EMPTY`, one
 * `undefined` for a `Promise<void>`. The two were stored alike, and an app interceptor outside
 * `@Idempotent()` (`defaultIfEmpty`, an envelope `map`) then answered a retry differently from
 * the first call (helper-59). Also: a handler an app's `timeout()` gives up on after it started
 * runs to its end and is recorded (the rule that a started handler's key never frees again),
 * unlike without the library, where the timeout would cancel its Observable.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  type CallHandler,
  Controller,
  Injectable,
  Module,
  type NestInterceptor,
} from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { EventPattern, MessagePattern, Payload } from '@nestjs/microservices';
import { randomUUID } from 'node:crypto';
import { defaultIfEmpty, EMPTY, firstValueFrom, map, Observable, timeout, toArray } from 'rxjs';
import { Idempotent, IdempotencyModule, ProblemCode } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { Executions } from '../fixtures/payments.fixture.js';
import { startTcpMicroservice, type TcpMicroservice } from '../fixtures/tcp-microservice.js';

const exec = new Executions();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** An app's envelope, and its default for an answer of nothing, outside `@Idempotent()`. */
@Injectable()
class EnvelopeInterceptor implements NestInterceptor {
  intercept(_context: unknown, next: CallHandler) {
    return next.handle().pipe(
      map((data: unknown) => ({ data: data ?? 'undefined' })),
      defaultIfEmpty({ data: 'nothing' }),
      timeout(200),
    );
  }
}

/** A value whose reading throws (a toJSON, a getter, a Proxy): it cannot be stored. */
class Receipt {
  toJSON(): unknown {
    throw new Error('Receipt.toJSON failed');
  }
}

@Controller()
class Payments {
  @MessagePattern('payments.receipt')
  @Idempotent()
  receipt() {
    exec.hit('receipt');
    return new Receipt();
  }

  @MessagePattern('payments.silent')
  @Idempotent()
  silent() {
    exec.hit('silent');
    return EMPTY;
  }

  @MessagePattern('payments.settle')
  @Idempotent()
  async settle() {
    exec.hit('settle');
  }

  /** An Observable the app's timeout() cancels before it charges. */
  @EventPattern('payments.slow')
  @Idempotent()
  slow(@Payload() data: { idempotencyKey: string }) {
    return new Observable<void>((subscriber) => {
      const timer = setTimeout(() => {
        exec.hit('slow charged', data.idempotencyKey);
        subscriber.complete();
      }, 600);
      return () => clearTimeout(timer);
    });
  }
}

describe('RPC answers of nothing, replayed behind an app interceptor (TCP)', () => {
  let db: MigratedDatabase;
  let tcp: TcpMicroservice;

  beforeAll(async () => {
    db = await createMigratedDatabase('e13none');
    @Module({
      imports: [
        IdempotencyModule.forRoot({ dataSource: db.dataSource, cleanup: { enabled: false } }),
      ],
      controllers: [Payments],
      providers: [{ provide: APP_INTERCEPTOR, useClass: EnvelopeInterceptor }],
    })
    class AppModule {}
    tcp = await startTcpMicroservice(AppModule);
  });
  afterAll(async () => {
    await tcp?.close();
    await db?.drop();
  });

  it.each([
    ['payments.silent', 'silent', { data: 'nothing' }],
    ['payments.settle', 'settle', { data: 'undefined' }],
  ])(
    '%s: the retry gets what the first call got, without a second run',
    async (pattern, name, answer) => {
      const key = randomUUID();
      const send = () =>
        firstValueFrom(tcp.client.send(pattern, { idempotencyKey: key }).pipe(toArray()));
      const first = await send();
      const retry = await send();
      expect(first).toEqual([answer]);
      expect(retry).toEqual(first);
      expect(exec.count(name)).toBe(1);
    },
  );

  it('records a run whose value throws while stored as run without a body: refused, never run again', async () => {
    const key = randomUUID();
    // The first caller gets nothing: Nest's own serializer cannot write the value either.
    const send = () =>
      firstValueFrom(
        tcp.client.send('payments.receipt', { idempotencyKey: key }).pipe(timeout(1000)),
      ).catch((e) => e);
    await send();
    const [record] = await db.records('idempotency_key = $1', [key]);
    expect(record?.status).toBe('completed');
    expect(await send()).toMatchObject({ code: ProblemCode.NotReplayable });
    expect(exec.count('receipt')).toBe(1);
  });

  it("records a started event handler an app's timeout() gave up on: it ran, so it is never run again", async () => {
    const key = randomUUID();
    await firstValueFrom(tcp.client.emit('payments.slow', { idempotencyKey: key }));
    await sleep(900);
    expect(exec.count('slow charged', key)).toBe(1);
    const [record] = await db.records('idempotency_key = $1', [key]);
    expect(record?.status).toBe('completed');
    await firstValueFrom(tcp.client.emit('payments.slow', { idempotencyKey: key }));
    await sleep(900);
    expect(exec.count('slow charged', key)).toBe(1);
  });
});
