/**
 * A standalone app process for the recovery-point reliability spec: POST /charges charges a card
 * processor on loopback (PROCESSOR_URL) with `ctx.keyFor('charge')` as its idempotency key, and
 * in MODE `lease` inside `ctx.step('charge', ...)` (steps are refused on transactional routes;
 * MODE `transactional` and `single` rely on the derived key alone). CRASH makes it SIGKILL itself:
 * `after-charge` once the external call returned (its step committed, in `lease` mode),
 * `in-step` after the processor answered but before the step's recovery point was committed.
 * Same protocol as server.ts: prints `READY {"port":..}`, exits when stdin closes.
 */
import 'reflect-metadata';
import { Body, Controller, HttpCode, Module, Post } from '@nestjs/common';
import { DataSource } from 'typeorm';
import {
  Idempotent,
  IdempotencyCtx,
  IdempotencyModule,
  type IdempotencyContext,
} from '../../../lib/index.js';
import { serveChildApp } from './serve.js';

const url = process.env.DATABASE_URL;
const processorUrl = process.env.PROCESSOR_URL;
if (!url || !processorUrl) throw new Error('DATABASE_URL and PROCESSOR_URL are required');
const mode = (process.env.MODE ?? 'lease') as 'lease' | 'transactional' | 'single';
const crash = process.env.CRASH ?? '';
const leaseSeconds = Number(process.env.LEASE_SECONDS ?? 60);

const dataSource = new DataSource({ type: 'postgres', url });

async function chargeCard(key: string, amount: number): Promise<{ id: string }> {
  const res = await fetch(`${processorUrl}/charges`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: JSON.stringify({ amount }),
  });
  if (!res.ok) throw new Error(`processor answered ${res.status}`);
  const charge = (await res.json()) as { id: string };
  if (crash === 'in-step') process.kill(process.pid, 'SIGKILL');
  return charge;
}

@Controller()
class ChargesController {
  @Post('charges')
  @HttpCode(201)
  @Idempotent(mode === 'lease' ? {} : { transactional: mode === 'single' ? 'single' : true })
  async charge(@Body() body: { amount: number }, @IdempotencyCtx() idem?: IdempotencyContext) {
    const key = idem!.keyFor('charge');
    const charge =
      mode === 'lease'
        ? await idem!.step('charge', () => chargeCard(key, body.amount))
        : await chargeCard(key, body.amount);
    if (crash === 'after-charge') process.kill(process.pid, 'SIGKILL');
    // The handler's own write, in the route's transaction when it has one.
    await (idem!.manager ?? dataSource).query(
      `INSERT INTO reliability_executions (idempotency_key, instance) VALUES ($1, $2)`,
      [charge.id, mode],
    );
    return { charge, run: idem!.run };
  }
}

@Module({
  imports: [
    IdempotencyModule.forRoot({
      dataSource,
      leaseSeconds,
      derivedKeySecret: 'reliability-derived-key-secret-0123456789',
      cleanup: { enabled: false },
    }),
  ],
  controllers: [ChargesController],
})
class ChildModule {}

serveChildApp(ChildModule, `recovery-${mode}`);
