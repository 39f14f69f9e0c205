/**
 * An RPC handler's Observable emits its receipt (after a recorded `charge` step), then the next
 * step's recovery point cannot be recorded (`RecoveryPointError`). As docs/recovery-points.md
 * says, the key is neither freed nor completed, so a retry resumes the run: also after values
 * were sent, and after the caller left. d368a0e (same day) completed such a key as a stream that
 * failed after its values (found by helper-72).
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
import { MessagePattern, Payload, type ClientProxy } from '@nestjs/microservices';
import { randomUUID } from 'node:crypto';
import { Observable, timeout } from 'rxjs';
import {
  Idempotent,
  IdempotencyCtx,
  IdempotencyModule,
  type IdempotencyContext,
} from '../../lib/index.js';
import { startTcpMicroservice } from '../fixtures/tcp-microservice.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';

const SECRET = 'r'.repeat(32);
let charges = 0;
let shipments = 0;

@Controller()
class PaymentsHandler {
  @MessagePattern('payments.charge.ship')
  @Idempotent()
  charge(
    @Payload() _data: { idempotencyKey: string },
    @IdempotencyCtx() idem?: IdempotencyContext,
  ) {
    return new Observable((subscriber) => {
      void (async () => {
        const charge = await idem!.step('charge', () => ({ id: `ch_${++charges}` }));
        subscriber.next({ charge });
        // Its recovery point is refused by the database (a trigger): RecoveryPointError.
        await idem!.step('unsaved', () => ({ shipment: ++shipments }));
        subscriber.complete();
      })().catch((err: unknown) => subscriber.error(err));
    });
  }
}

describe('an RPC stream whose recovery point fails after its receipt', () => {
  let db: MigratedDatabase;
  let client: ClientProxy;
  let close: () => Promise<void>;

  beforeAll(async () => {
    db = await createMigratedDatabase('step');
    await db.dataSource.query(`
      CREATE FUNCTION refuse_unsaved() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.name = 'unsaved' THEN RAISE EXCEPTION 'refused for the test'; END IF; RETURN NEW; END $$;
      CREATE TRIGGER refuse_unsaved BEFORE INSERT ON idempotency_keys_steps
        FOR EACH ROW EXECUTE FUNCTION refuse_unsaved();`);
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

  it('keeps the key in progress for a resume, as docs/recovery-points.md says', async () => {
    const idempotencyKey = randomUUID();
    const values: unknown[] = [];
    const failure = await new Promise<unknown>((resolve) => {
      client.send('payments.charge.ship', { idempotencyKey }).subscribe({
        next: (v) => values.push(v),
        error: resolve,
        complete: () => resolve(undefined),
      });
    });
    await new Promise((r) => setTimeout(r, 300));
    const [record] = await db.records('idempotency_key = $1', [idempotencyKey]);
    expect(charges).toBe(1);
    expect(shipments).toBe(1);
    // The documented contract: neither freed nor completed, the caller told 503.
    expect({ status: record.status, failure }).toMatchObject({
      status: 'in_progress',
      failure: { code: 'idempotency_store_unavailable' },
    });
  });
});

/** The NestJS docs' TimeoutInterceptor, global (outside @Idempotent(), where the docs put it). */
@Injectable()
class TimeoutInterceptor implements NestInterceptor {
  intercept(_context: unknown, next: CallHandler) {
    return next.handle().pipe(timeout(150));
  }
}

@Controller()
class SlowPaymentsHandler {
  @MessagePattern('payments.charge.ship.slow')
  @Idempotent()
  charge(
    @Payload() _data: { idempotencyKey: string },
    @IdempotencyCtx() idem?: IdempotencyContext,
  ) {
    return new Observable((subscriber) => {
      void (async () => {
        const charge = await idem!.step('charge', () => ({ id: `ch_${++charges}` }));
        subscriber.next({ charge });
        await new Promise((r) => setTimeout(r, 400)); // the app's timeout() answers meanwhile
        await idem!.step('unsaved', () => ({ shipment: ++shipments }));
        subscriber.complete();
      })().catch((err: unknown) => subscriber.error(err));
    });
  }
}

describe('the same after the caller left (app timeout())', () => {
  let db: MigratedDatabase;
  let client: ClientProxy;
  let close: () => Promise<void>;

  beforeAll(async () => {
    db = await createMigratedDatabase('stepslow');
    await db.dataSource.query(`
      CREATE FUNCTION refuse_unsaved() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.name = 'unsaved' THEN RAISE EXCEPTION 'refused for the test'; END IF; RETURN NEW; END $$;
      CREATE TRIGGER refuse_unsaved BEFORE INSERT ON idempotency_keys_steps
        FOR EACH ROW EXECUTE FUNCTION refuse_unsaved();`);
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          dataSource: db.dataSource,
          derivedKeySecret: SECRET,
          cleanup: { enabled: false },
        }),
      ],
      controllers: [SlowPaymentsHandler],
      providers: [{ provide: APP_INTERCEPTOR, useClass: TimeoutInterceptor }],
    })
    class AppModule {}
    ({ client, close } = await startTcpMicroservice(AppModule));
  });
  afterAll(async () => {
    await close?.();
    await db?.drop();
  });

  it('keeps the key in progress for a resume, as docs/recovery-points.md says', async () => {
    const idempotencyKey = randomUUID();
    const before = { charges, shipments };
    await new Promise<unknown>((resolve) => {
      client.send('payments.charge.ship.slow', { idempotencyKey }).subscribe({
        error: resolve,
        complete: () => resolve(undefined),
      });
    });
    await new Promise((r) => setTimeout(r, 800));
    const [record] = await db.records('idempotency_key = $1', [idempotencyKey]);
    expect({ charges: charges - before.charges, shipments: shipments - before.shipments }).toEqual({
      charges: 1,
      shipments: 1,
    });
    expect(record.status).toBe('in_progress');
  });
});
