import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, type INestApplication, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { createHash, randomUUID } from 'node:crypto';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { Executions, type Platform } from '../fixtures/payments.fixture.js';

const exec = new Executions();

@Controller('payouts')
class PayoutsController {
  @Post()
  @Idempotent()
  payout(@Body() body: { iban: string; amount: number }) {
    return { paidTo: body.iban, amount: body.amount, run: exec.hit('payout') };
  }

  @Post(':how')
  @Idempotent()
  other(@Body() body: { iban: string; amount: number }) {
    return { paidTo: body.iban, amount: body.amount, run: exec.hit('payout') };
  }
}

describe.each<Platform>(['express', 'fastify'])('an async fingerprint option, %s', (platform) => {
  let db: MigratedDatabase;
  let app: INestApplication;
  let url: string;

  beforeAll(async () => {
    db = await createMigratedDatabase(`e12fp_${platform}`);
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          dataSource: db.dataSource,
          cleanup: { enabled: false },
          // As an app writes it when the fingerprint needs I/O (docs/limits-and-choices.md:
          // "make it return the files' hashes"): the option's type, (req) => unknown, accepts it.
          fingerprint: async (req) => {
            await new Promise((resolve) => setImmediate(resolve));
            if (req.url.endsWith('/map')) return new Map([['iban', req.body.iban]]);
            if (req.url.endsWith('/nested-map'))
              return { details: new Map([['iban', req.body.iban]]) };
            if (req.url.endsWith('/nested-promise'))
              return { details: Promise.resolve(req.body.iban) };
            if (req.url.endsWith('/none')) return undefined;
            return {
              body: req.body,
              digest: createHash('sha256')
                .update(JSON.stringify(req.body ?? null))
                .digest('hex'),
            };
          },
        }),
      ],
      controllers: [PayoutsController],
    })
    class FpModule {}
    const adapter = platform === 'fastify' ? new FastifyAdapter() : new ExpressAdapter();
    app = await NestFactory.create(FpModule, adapter as never, { logger: false });
    await app.listen(0, '127.0.0.1');
    url = `http://127.0.0.1:${app.getHttpServer().address().port}`;
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  const send = (path: string, key: string, body: unknown) =>
    fetch(`${url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body: JSON.stringify(body),
    }).then(async (r) => ({
      status: r.status,
      replayed: r.headers.get('idempotent-replayed'),
      body: await r.text(),
    }));

  it('awaits it: another body with the key is refused, the same body replayed, one run', async () => {
    const key = randomUUID();
    const before = exec.count('payout');
    const first = await send('/payouts', key, { iban: 'DE00 1111', amount: 5 });
    expect(first.status).toBe(201);
    const other = await send('/payouts', key, { iban: 'FR99 2222', amount: 50000 });
    expect(other.status).toBe(409);
    expect(other.body).not.toContain('DE00 1111');
    const retry = await send('/payouts', key, { iban: 'DE00 1111', amount: 5 });
    expect(retry).toMatchObject({ status: 201, replayed: 'true', body: first.body });
    expect(exec.count('payout') - before).toBe(1);
  });

  it('refuses what hashes as {} (a Map, a Promise inside) or nothing for a body, running and storing nothing', async () => {
    const before = exec.count('payout');
    const stored = (await db.records()).length;
    for (const how of ['map', 'nested-map', 'nested-promise']) {
      const key = randomUUID();
      const payout = { iban: 'DE00 1111', amount: 5 };
      const refused = await send(`/payouts/${how}`, key, payout);
      expect(refused.status).toBe(500);
      expect(JSON.parse(refused.body)).toMatchObject({ code: 'idempotency_misconfigured' });
      // Not claimed: the same request is refused again, not replayed or run.
      expect((await send(`/payouts/${how}`, key, payout)).status).toBe(500);
    }
    const none = await send('/payouts/none', randomUUID(), { iban: 'DE00 1111', amount: 5 });
    expect(none.status).toBe(415);
    expect(JSON.parse(none.body)).toMatchObject({ code: 'idempotency_body_unreadable' });
    expect(exec.count('payout')).toBe(before);
    expect(await db.records()).toHaveLength(stored);
  });
});
