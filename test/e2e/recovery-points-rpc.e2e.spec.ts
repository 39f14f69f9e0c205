/** `ctx.keyFor()` and `ctx.step()` on a microservice (TCP) message handler: the same as HTTP. */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Module } from '@nestjs/common';
import { MessagePattern, Payload, type ClientProxy } from '@nestjs/microservices';
import { randomUUID } from 'node:crypto';
import { firstValueFrom } from 'rxjs';
import {
  Idempotent,
  IdempotencyCtx,
  IdempotencyModule,
  type IdempotencyContext,
} from '../../lib/index.js';
import { deriveKey, derivedKeySecret } from '../../lib/recovery/derived-key.js';
import { startTcpMicroservice } from '../fixtures/tcp-microservice.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { endLease, stepsCommitted } from '../fixtures/abandoned-run.js';

const SECRET = 'r'.repeat(32);
let charges = 0;
let hold: Promise<void> | undefined;
let refunds = 0;

@Controller()
class PaymentsHandler {
  @MessagePattern('payments.charge')
  @Idempotent()
  async charge(
    @Payload() data: { amount: number; idempotencyKey: string },
    @IdempotencyCtx() idem?: IdempotencyContext,
  ) {
    const key = idem!.keyFor('charge');
    const charge = await idem!.step('charge', () => ({ id: `ch_${++charges}`, key }));
    const wait = hold;
    hold = undefined;
    await wait;
    return { charge, run: idem!.run, amount: data.amount };
  }

  /** Its step's recovery point is refused by the database (a trigger): the handler retries it. */
  @MessagePattern('payments.refund')
  @Idempotent()
  async refund(
    @Payload() _data: { idempotencyKey: string },
    @IdempotencyCtx() idem?: IdempotencyContext,
  ) {
    let last: unknown;
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        return await idem!.step('unsaved', () => ({ id: `re_${++refunds}` }));
      } catch (err) {
        last = err;
      }
    }
    throw last;
  }
}

describe('recovery points on a microservice handler', () => {
  let db: MigratedDatabase;
  let client: ClientProxy;
  let close: () => Promise<void>;

  beforeAll(async () => {
    db = await createMigratedDatabase('recovery_rpc');
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          dataSource: db.dataSource,
          derivedKeySecret: SECRET,
          cleanup: { enabled: false },
        }),
      ],
      controllers: [PaymentsHandler],
    })
    class AppModule {}
    ({ client, close } = await startTcpMicroservice(AppModule));
  });
  afterAll(async () => {
    await close?.();
    await db?.drop();
  });

  it('a step whose recovery point is refused: its fn runs once, the caller is told 503, the key is kept', async () => {
    await db.dataSource.query(`
      CREATE FUNCTION refuse_unsaved() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.name = 'unsaved' THEN RAISE EXCEPTION 'refused for the test'; END IF; RETURN NEW; END $$;
      CREATE TRIGGER refuse_unsaved BEFORE INSERT ON idempotency_keys_steps
        FOR EACH ROW EXECUTE FUNCTION refuse_unsaved();`);
    const idempotencyKey = randomUUID();
    const before = refunds;
    const failure = await firstValueFrom(client.send('payments.refund', { idempotencyKey })).catch(
      (err: unknown) => err,
    );
    expect(failure).toMatchObject({ code: 'idempotency_store_unavailable', status: 503 });
    expect(JSON.stringify(failure)).not.toContain('refused for the test');
    // Retried three times by the handler, called once: it may have refunded.
    expect(refunds).toBe(before + 1);
    const [record] = await db.records('idempotency_key = $1', [idempotencyKey]);
    expect(record.status).toBe('in_progress');
    const retry = await firstValueFrom(client.send('payments.refund', { idempotencyKey })).catch(
      (err: unknown) => err,
    );
    expect(retry).toMatchObject({ code: 'request_in_progress' });
    expect(refunds).toBe(before + 1);
  });

  it('resumes a run abandoned after its step, with the key derived from the scope', async () => {
    const idempotencyKey = randomUUID();
    const data = { amount: 5, idempotencyKey };
    let release!: () => void;
    hold = new Promise<void>((resolve) => (release = resolve));
    const abandoned = firstValueFrom(client.send('payments.charge', data)).catch(() => null);
    await stepsCommitted(db.dataSource, idempotencyKey);
    await endLease(db.dataSource, idempotencyKey);
    const before = charges;
    const resumed = await firstValueFrom(client.send('payments.charge', data));
    release();
    await abandoned;
    const scope = { key: idempotencyKey, endpoint: 'RPC payments.charge', userId: '' };
    const key = deriveKey(derivedKeySecret(SECRET)!, scope, 'charge');
    expect(resumed).toEqual({ charge: { id: `ch_${before}`, key }, run: 2, amount: 5 });
    expect(charges).toBe(before);
  });
});
