/**
 * The rule of the execution: once the handler ran, nothing frees its key for a second run. Here
 * the library's own bookkeeping fails after the handler returned (an app's `storeIf` throws): the
 * key must still be completed without a body, not left to expire and run again.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, HttpCode, Module, Post } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import { listenApp } from '../fixtures/listen.js';

const runs = new Map<string, number>();

@Controller('rule')
class RuleController {
  @Post()
  @HttpCode(203)
  @Idempotent()
  charge(@Body() body: { ref: string }) {
    runs.set(body.ref, (runs.get(body.ref) ?? 0) + 1);
    return { ref: body.ref };
  }
}

describe('execution rule', () => {
  let db: MigratedDatabase;
  let url: string;
  let close: () => Promise<void>;

  beforeAll(async () => {
    db = await createMigratedDatabase('exec_rule');
    const storeIf = (status: number) => {
      if (status === 203) throw new Error('app bug in storeIf');
      return status < 500;
    };
    const options = { dataSource: db.dataSource, cleanup: { enabled: false }, storeIf };
    @Module({
      imports: [IdempotencyModule.forRoot({ ...options, leaseSeconds: 1 })],
      controllers: [RuleController],
    })
    class AppModule {}
    ({ url, close } = await listenApp(AppModule));
  });
  afterAll(async () => {
    await close?.();
    await db?.drop();
  });

  it('bookkeeping that throws after the handler ran completes the key without a body', async () => {
    const key = randomUUID();
    const ref = randomUUID();
    const first = await send(url, '/rule', { key, body: { ref } });
    expect(first.status).toBe(203);
    expect(first.json()).toEqual({ ref });
    // Past the lease: a key left in progress would be taken over and run again.
    await new Promise((r) => setTimeout(r, 1_500));
    const again = await send(url, '/rule', { key, body: { ref } });
    expect(again.status).toBe(409);
    expect(again.json()).toMatchObject({
      code: 'idempotency_response_not_replayable',
      original_status: 203,
    });
    expect(runs.get(ref)).toBe(1);
  });
});
