/**
 * `@Idempotent()` on a microservice controller class: its message and event handlers are
 * protected (they ran with none before), each handler of one event is its own operation (two
 * services listening to `order.created` both run, once each), a class's `required` does not drop
 * events sent without a key, and the class's attachment stays outside the method's own
 * interceptors, so a `ClassSerializerInterceptor` there shapes the value stored and replayed.
 * Found by reviews acting as new users.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ClassSerializerInterceptor, Controller, Module, UseInterceptors } from '@nestjs/common';
import { EventPattern, MessagePattern, Payload, type ClientProxy } from '@nestjs/microservices';
import { Exclude } from 'class-transformer';
import { randomUUID } from 'node:crypto';
import { firstValueFrom } from 'rxjs';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { startTcpMicroservice } from '../fixtures/tcp-microservice.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const billed: string[] = [];
const mailed: string[] = [];
const audited: string[] = [];
let userRuns = 0;

/** Two services listening to one event, each protected at class level. */
@Idempotent()
@Controller()
class BillingHandler {
  @EventPattern('order.created')
  async onOrder(@Payload() data: { id: string }) {
    await sleep(50);
    billed.push(data.id);
  }
}

@Idempotent()
@Controller()
class MailHandler {
  @EventPattern('order.created')
  async onOrder(@Payload() data: { id: string }) {
    await sleep(50);
    mailed.push(data.id);
  }
}

/** A hybrid-style controller: keys required for commands; an audit event carries none. */
@Idempotent({ required: true })
@Controller()
class PaymentsHandler {
  @MessagePattern('payments.create')
  create(@Payload() data: { amount: number }) {
    return { amount: data.amount };
  }

  @EventPattern('payments.audit')
  audit(@Payload() data: { id: string }) {
    audited.push(data.id);
  }
}

class UserEntity {
  id!: string;
  @Exclude()
  password!: string;
  constructor(partial: Partial<UserEntity>) {
    Object.assign(this, partial);
  }
}

/** The serializer listed after (so outside) @Idempotent() on the method, as it was honoured before. */
@Controller()
class UsersHandler {
  @MessagePattern('users.create')
  @UseInterceptors(ClassSerializerInterceptor)
  @Idempotent()
  create(@Payload() data: { id: string }) {
    userRuns++;
    return new UserEntity({ id: data.id, password: 's3cret-hash' });
  }
}

describe('class-level @Idempotent() on microservice controllers', () => {
  let db: MigratedDatabase;
  let client: ClientProxy;
  let close: () => Promise<void>;

  beforeAll(async () => {
    db = await createMigratedDatabase('rpc_class');
    @Module({
      imports: [
        IdempotencyModule.forRoot({ dataSource: db.dataSource, cleanup: { enabled: false } }),
      ],
      controllers: [BillingHandler, MailHandler, PaymentsHandler, UsersHandler],
    })
    class AppModule {}
    ({ client, close } = await startTcpMicroservice(AppModule));
  });
  afterAll(async () => {
    await close?.();
    await db?.drop();
  });

  it('two services handling one event with a key: both run once', async () => {
    const id = randomUUID();
    const idempotencyKey = randomUUID();
    await firstValueFrom(client.emit('order.created', { id, idempotencyKey }), {
      defaultValue: undefined,
    });
    await sleep(500);
    const rows = await db.records('idempotency_key = $1', [idempotencyKey]);
    expect(rows.map((r) => [r.endpoint, r.status]).sort()).toEqual([
      ['RPC order.created BillingHandler.onOrder', 'completed'],
      ['RPC order.created MailHandler.onOrder', 'completed'],
    ]);
    expect({
      billed: billed.filter((x) => x === id).length,
      mailed: mailed.filter((x) => x === id).length,
    }).toEqual({ billed: 1, mailed: 1 });
    // Delivered again (a broker's redelivery): neither runs a second time.
    await firstValueFrom(client.emit('order.created', { id, idempotencyKey }), {
      defaultValue: undefined,
    });
    await sleep(300);
    expect(billed.filter((x) => x === id)).toHaveLength(1);
    expect(mailed.filter((x) => x === id)).toHaveLength(1);
  });

  it('an audit event without a key in a required:true controller still runs', async () => {
    const id = randomUUID();
    await firstValueFrom(client.emit('payments.audit', { id }), { defaultValue: undefined });
    await sleep(300);
    expect(audited).toContain(id);
  });

  it('a serializer outside @Idempotent() on the method: the replay hides @Exclude() fields too', async () => {
    const idempotencyKey = randomUUID();
    const first = await firstValueFrom(client.send('users.create', { id: 'u1', idempotencyKey }));
    const again = await firstValueFrom(client.send('users.create', { id: 'u1', idempotencyKey }));
    const [row] = await db.records('idempotency_key = $1', [idempotencyKey]);
    expect(JSON.parse(row.response_raw.toString())).toEqual({ id: 'u1' });
    expect(first).toEqual({ id: 'u1' });
    expect(userRuns).toBe(1);
    expect(again).toEqual(first);
  });
});
