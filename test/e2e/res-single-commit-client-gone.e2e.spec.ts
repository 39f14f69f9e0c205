/**
 * Single-commit `@Res()` handler that never answers a client that left: no lease is renewed for
 * it (its transaction holds the claim), so `maxHoldSeconds` never passes for it. Once the store
 * ends its transaction at `singleCommitMaxSeconds`, the run is concluded (rolled back, nothing
 * committed), not kept waiting in the process until shutdown (found by helper-78's review).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, Module, Post, Res } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import {
  IDEMPOTENCY_STORE,
  Idempotent,
  IdempotencyModule,
  type IdempotencyStore,
} from '../../lib/index.js';
import { inFlightRuns } from '../../lib/execution/in-flight-runs.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { listenApp, type ListeningApp } from '../fixtures/listen.js';
import { sendAndGiveUp } from '../fixtures/client-gone.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const runs = new Map<string, number>();

@Controller('charges')
class ChargesController {
  @Post()
  @Idempotent({ transactional: 'single' })
  charge(@Body() body: { ref: string }, @Res() _res: unknown) {
    runs.set(body.ref, (runs.get(body.ref) ?? 0) + 1);
    // Its callback never fires.
  }
}

describe('single-commit @Res() handler that never answers, client gone', () => {
  let db: MigratedDatabase;
  let listening: ListeningApp;

  beforeAll(async () => {
    db = await createMigratedDatabase('res_single_gone');
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          dataSource: db.dataSource,
          cleanup: { enabled: false },
          leaseSeconds: 3,
          singleCommitMaxSeconds: 2,
        }),
      ],
      controllers: [ChargesController],
    })
    class AppModule {}
    listening = await listenApp(AppModule, 'express');
  });
  afterAll(async () => {
    await listening?.close();
    await db?.drop();
  });

  it('is concluded once its transaction is ended by the bound; nothing was committed', async () => {
    const counts = inFlightRuns(listening.app.get<IdempotencyStore>(IDEMPOTENCY_STORE));
    const key = randomUUID();
    const ref = randomUUID();
    await sendAndGiveUp(listening.url, '/charges', key, { ref }, 150);
    await sleep(300);
    expect(counts.runs).toBe(1);
    await sleep(4_000); // the 2 s bound, then a watcher tick (every second)
    expect({ runs: counts.runs, waiting: counts.unanswered.size }).toEqual({ runs: 0, waiting: 0 });
    expect(await db.records('idempotency_key = $1', [key])).toEqual([]);
    // Nothing committed: the key is free, the retry runs (the documented single-commit bound).
    await sendAndGiveUp(listening.url, '/charges', key, { ref }, 150);
    await sleep(200);
    expect(runs.get(ref)).toBe(2);
  }, 20_000);
});
