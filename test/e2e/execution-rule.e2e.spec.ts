/**
 * The rule of the execution: once the handler ran, nothing frees its key for a second run. Here
 * the library's own bookkeeping fails after the handler returned (an app's `storeIf` throws): the
 * key must still be completed without a body, not left to expire and run again. And an outcome
 * `storeIf` does not keep frees the key only when the handler threw: one that returned is
 * completed without a body, its transaction's writes committed.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  Body,
  Controller,
  HttpCode,
  Module,
  Post,
  ServiceUnavailableException,
} from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import {
  Idempotent,
  IdempotencyCtx,
  type IdempotencyContext,
  IdempotencyModule,
} from '../../lib/index.js';
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

  /** Answers 202, which this app's `storeIf` does not keep: it returned, so it never runs again. */
  @Post('accepted')
  @HttpCode(202)
  @Idempotent({ transactional: true })
  async accept(@Body() body: { ref: string }, @IdempotencyCtx() idem: IdempotencyContext) {
    runs.set(body.ref, (runs.get(body.ref) ?? 0) + 1);
    await idem.manager!.query('INSERT INTO exec_rule_ledger (ref) VALUES ($1)', [body.ref]);
    return { ref: body.ref };
  }

  /** Throws a 503, which `storeIf` does not keep: the key is free for a fresh run. */
  @Post('unavailable')
  @Idempotent()
  unavailable(@Body() body: { ref: string }) {
    runs.set(body.ref, (runs.get(body.ref) ?? 0) + 1);
    throw new ServiceUnavailableException('processor down');
  }
}

describe('execution rule', () => {
  let db: MigratedDatabase;
  let url: string;
  let close: () => Promise<void>;

  beforeAll(async () => {
    db = await createMigratedDatabase('exec_rule');
    await db.dataSource.query('CREATE TABLE exec_rule_ledger (ref text NOT NULL)');
    const storeIf = (status: number) => {
      if (status === 203) throw new Error('app bug in storeIf');
      return status < 500 && status !== 202;
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

  it('an outcome storeIf does not keep, of a handler that returned: completed, writes committed', async () => {
    const key = randomUUID();
    const ref = randomUUID();
    const first = await send(url, '/rule/accepted', { key, body: { ref } });
    expect(first.status).toBe(202);
    const again = await send(url, '/rule/accepted', { key, body: { ref } });
    expect(again.status).toBe(409);
    expect(again.json()).toMatchObject({
      code: 'idempotency_response_not_replayable',
      original_status: 202,
    });
    expect(runs.get(ref)).toBe(1);
    // The client was told 202: the handler's write is there, not rolled back with a freed key.
    const rows = await db.dataSource.query('SELECT ref FROM exec_rule_ledger WHERE ref = $1', [
      ref,
    ]);
    expect(rows).toHaveLength(1);
    const [record] = await db.records('idempotency_key = $1', [key]);
    expect(record).toMatchObject({ status: 'completed', status_code: 202, response_raw: null });
  });

  it('an outcome storeIf does not keep, of a handler that threw: the key is free again', async () => {
    const key = randomUUID();
    const ref = randomUUID();
    expect((await send(url, '/rule/unavailable', { key, body: { ref } })).status).toBe(503);
    expect((await send(url, '/rule/unavailable', { key, body: { ref } })).status).toBe(503);
    expect(runs.get(ref)).toBe(2);
    expect(await db.records('idempotency_key = $1', [key])).toHaveLength(0);
  });
});
