import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Module } from '@nestjs/common';
import { MessagePattern, Payload, type ClientProxy } from '@nestjs/microservices';
import { randomUUID } from 'node:crypto';
import { firstValueFrom } from 'rxjs';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { startTcpMicroservice } from '../fixtures/tcp-microservice.js';

const runs: string[] = [];

// `endpoint`: "Scope name stored in endpoint; two routes with the same name share keys."
@Controller()
class LedgerHandler {
  @MessagePattern('ledger.credit')
  @Idempotent({ endpoint: 'ledger' })
  credit(@Payload() data: { account: string; amount: number }) {
    runs.push('credit');
    return { op: 'credit', account: data.account, amount: data.amount };
  }

  @MessagePattern('ledger.debit')
  @Idempotent({ endpoint: 'ledger' })
  debit(@Payload() data: { account: string; amount: number }) {
    runs.push('debit');
    return { op: 'debit', account: data.account, amount: data.amount };
  }
}

describe('RPC handlers sharing an endpoint name', () => {
  let db: MigratedDatabase;
  let client: ClientProxy;
  let close: () => Promise<void>;

  beforeAll(async () => {
    db = await createMigratedDatabase('e12rpcep');
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          dataSource: db.dataSource,
          cleanup: { enabled: false },
          getRpcKey: (data: { idempotencyKey?: string }) => data?.idempotencyKey,
        }),
      ],
      controllers: [LedgerHandler],
    })
    class AppModule {}
    ({ client, close } = await startTcpMicroservice(AppModule));
  });
  afterAll(async () => {
    await close?.();
    await db?.drop();
  });

  it("never answers a debit with the credit's stored value (HTTP routes sharing a name get 409)", async () => {
    const idempotencyKey = randomUUID();
    const payload = { account: 'acc_1', amount: 100, idempotencyKey };
    const credit = await firstValueFrom(client.send('ledger.credit', payload));
    expect(credit).toMatchObject({ op: 'credit' });
    const debit = await firstValueFrom(client.send('ledger.debit', payload)).catch(
      (err: unknown) => ({ error: err }),
    );
    expect(debit).not.toMatchObject({ op: 'credit' });
    // The shared name shares keys: the debit is refused as the key's reuse, and does not run.
    expect(debit).toMatchObject({ error: { status: 409 } });
    expect(runs).toEqual(['credit']);
    // The credit's own retry replays it.
    await expect(firstValueFrom(client.send('ledger.credit', payload))).resolves.toEqual(credit);
    expect(runs).toEqual(['credit']);
  });
});
