/**
 * Nest joins the `@EventPattern()` handlers of one event with `forkJoin`, which unsubscribes the
 * others as soon as one fails or ends without a value. A handler whose first run failed (its key
 * freed) must run when the event comes again, whatever its sibling answers then. Found by
 * helper-58: a sibling's replay of a `Promise<void>` (replayed as an empty stream) or its refusal
 * ended the join while the other's claim was in flight; that claim was cancelled and the other
 * handler never ran again, on any resend.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Module } from '@nestjs/common';
import { EventPattern, Payload } from '@nestjs/microservices';
import { randomUUID } from 'node:crypto';
import { firstValueFrom } from 'rxjs';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { Executions } from '../fixtures/payments.fixture.js';
import { startTcpMicroservice, type TcpMicroservice } from '../fixtures/tcp-microservice.js';

const exec = new Executions();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

@Controller()
class NotifyHandler {
  /** Answers nothing (`Promise<void>`): its replay is no value. */
  @EventPattern('order.paid')
  @Idempotent()
  async onPaid(@Payload() _data: unknown) {
    exec.hit('notify');
  }
}

@Controller()
class InvoiceHandler {
  /** Returns what JSON cannot hold (an entity pointing back at itself): a duplicate is refused. */
  @EventPattern('order.refunded')
  @Idempotent()
  async onRefund(@Payload() _data: unknown) {
    exec.hit('invoice');
    await sleep(20);
    const invoice: Record<string, unknown> = { id: 1 };
    invoice.order = { id: 7, invoices: [invoice] };
    return invoice;
  }
}

@Controller()
class LedgerHandler {
  /** Fails on its first run of each event (its key is freed), then books. */
  @EventPattern('order.paid')
  @Idempotent()
  async onPaid(@Payload() data: { idempotencyKey: string }) {
    await this.book(data.idempotencyKey);
  }

  @EventPattern('order.refunded')
  @Idempotent()
  async onRefund(@Payload() data: { idempotencyKey: string }) {
    await this.book(data.idempotencyKey);
  }

  private async book(key: string) {
    await sleep(100);
    exec.hit('ledger-attempt', key);
    if (exec.count('ledger-attempt', key) === 1) throw new Error('ledger unavailable');
    exec.hit('ledger', key);
  }
}

describe('@Idempotent() event handlers beside each other (TCP)', () => {
  let db: MigratedDatabase;
  let tcp: TcpMicroservice;

  beforeAll(async () => {
    db = await createMigratedDatabase('e13sib');
    @Module({
      imports: [
        IdempotencyModule.forRoot({ dataSource: db.dataSource, cleanup: { enabled: false } }),
      ],
      controllers: [NotifyHandler, InvoiceHandler, LedgerHandler],
    })
    class AppModule {}
    tcp = await startTcpMicroservice(AppModule);
  });
  afterAll(async () => {
    await tcp?.close();
    await db?.drop();
  });

  async function sendUntilBooked(pattern: string, key: string): Promise<void> {
    const event = { idempotencyKey: key, amount: 5 };
    for (let i = 0; i < 3 && exec.count('ledger', key) === 0; i++) {
      await firstValueFrom(tcp.client.emit(pattern, event));
      await sleep(800);
    }
  }

  it('runs a handler whose first run failed when the event comes again, beside a replay of nothing', async () => {
    const key = randomUUID();
    await sendUntilBooked('order.paid', key);
    expect([exec.count('notify'), exec.count('ledger', key)]).toEqual([1, 1]);
  });

  it('runs it beside a refusal of its sibling (a value that could not be stored)', async () => {
    const key = randomUUID();
    await sendUntilBooked('order.refunded', key);
    expect([exec.count('invoice'), exec.count('ledger', key)]).toEqual([1, 1]);
  });
});
