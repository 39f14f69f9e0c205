/**
 * A standalone app process for the reliability specs: one idempotent route whose handler records
 * every execution in `reliability_executions` (the spec creates it) before sleeping HANDLER_MS.
 *
 * Environment: DATABASE_URL (required), INSTANCE (name in the executions table and the body),
 * HANDLER_MS (default 50), LEASE_SECONDS (default 60), TTL_SECONDS (default 86 400),
 * REPLAY_AUDIT_FLUSH_MS (default 1 000), MODE (`lease`, the default, or `single`:
 * the route is `transactional: 'single'` and the execution row is written through its
 * transaction, so rows count committed executions). Listens on a free port of 127.0.0.1 and
 * prints one line `READY {"port":<port>,"pid":<pid>}` on stdout when it accepts requests. Exits
 * when its stdin closes (the spawning jest worker is gone), so no orphan outlives a crashed run.
 */
import 'reflect-metadata';
import { Controller, Headers, HttpCode, Module, Post } from '@nestjs/common';
import { DataSource } from 'typeorm';
import {
  Idempotent,
  IdempotencyCtx,
  IdempotencyModule,
  type IdempotencyContext,
} from '../../../lib/index.js';
import { serveChildApp } from './serve.js';

const url = process.env.DATABASE_URL;
if (!url) throw new Error('DATABASE_URL is required');
const instance = process.env.INSTANCE ?? 'child';
const handlerMs = Number(process.env.HANDLER_MS ?? 50);
const leaseSeconds = Number(process.env.LEASE_SECONDS ?? 60);
const single = process.env.MODE === 'single';
const ttlSeconds = Number(process.env.TTL_SECONDS ?? 86_400);
const replayAuditFlushMs = Number(process.env.REPLAY_AUDIT_FLUSH_MS ?? 1_000);

const dataSource = new DataSource({
  type: 'postgres',
  url,
  applicationName: `reliability-${instance}`,
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

@Controller()
class ChargesController {
  @Post('charges')
  @HttpCode(201)
  @Idempotent(single ? { transactional: 'single' } : {})
  async charge(
    @Headers('idempotency-key') key: string | undefined,
    @IdempotencyCtx() idem?: IdempotencyContext,
  ) {
    const db = single ? idem!.manager! : dataSource;
    const [row] = (await db.query(
      `INSERT INTO reliability_executions (idempotency_key, instance) VALUES ($1, $2) RETURNING id`,
      [key ?? null, instance],
    )) as { id: number }[];
    await sleep(handlerMs);
    // Differs per execution, so "same bytes" in a spec means "same execution".
    return { charge: `ch_${row.id}`, instance, pid: process.pid };
  }
}

@Module({
  imports: [
    IdempotencyModule.forRoot({
      dataSource,
      leaseSeconds,
      ttlSeconds,
      replayAuditFlushMs,
      cleanup: { enabled: false },
    }),
  ],
  controllers: [ChargesController],
})
class ChildModule {}

serveChildApp(ChildModule, instance);
