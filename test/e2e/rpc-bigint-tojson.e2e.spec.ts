/**
 * The usual Prisma set-up patches `BigInt.prototype.toJSON`, so Nest's transports send a bigint id
 * as its digits. The stored RPC value is the canonical JSON with `toJSON()` applied, as
 * JSON.stringify applies it to a bigint too. Until 2026-12-05 a bigint was refused before its
 * toJSON was looked at: the successful charge's retry got 409 not replayable (found by helper-72).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Module } from '@nestjs/common';
import { MessagePattern, Payload, type ClientProxy } from '@nestjs/microservices';
import { randomUUID } from 'node:crypto';
import { firstValueFrom } from 'rxjs';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { startTcpMicroservice } from '../fixtures/tcp-microservice.js';

let charges = 0;

@Controller()
class PaymentsHandler {
  @MessagePattern('payments.charge.prisma')
  @Idempotent()
  async charge(@Payload() data: { amount: number; idempotencyKey: string }) {
    charges++;
    // A Prisma row: BIGINT id.
    return { id: BigInt(1000 + charges), amount: data.amount };
  }
}

describe('RPC value with a bigint under the common BigInt.prototype.toJSON patch', () => {
  let db: MigratedDatabase;
  let client: ClientProxy;
  let close: () => Promise<void>;
  const had = Object.getOwnPropertyDescriptor(BigInt.prototype, 'toJSON');

  beforeAll(async () => {
    (BigInt.prototype as unknown as { toJSON(): string }).toJSON = function (this: bigint) {
      return this.toString();
    };
    db = await createMigratedDatabase('bigjson');
    @Module({
      imports: [
        IdempotencyModule.forRoot({ dataSource: db.dataSource, cleanup: { enabled: false } }),
      ],
      controllers: [PaymentsHandler],
    })
    class AppModule {}
    ({ client, close } = await startTcpMicroservice(AppModule));
  });
  afterAll(async () => {
    await close?.();
    await db?.drop();
    if (had) Object.defineProperty(BigInt.prototype, 'toJSON', had);
    else delete (BigInt.prototype as unknown as { toJSON?: unknown }).toJSON;
  });

  it('the retry answers the receipt the first call answered', async () => {
    const idempotencyKey = randomUUID();
    const send = () =>
      firstValueFrom(client.send('payments.charge.prisma', { amount: 700, idempotencyKey })).then(
        (v) => ({ v }),
        (e: unknown) => ({ e }),
      );
    const first = await send();
    expect(first).toEqual({ v: { id: '1001', amount: 700 } });
    const retry = await send();
    expect(charges).toBe(1);
    expect(retry).toEqual(first);
  });
});
