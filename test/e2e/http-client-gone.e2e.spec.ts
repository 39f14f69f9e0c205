/**
 * The client gives up (its HTTP timeout) while a slow charge runs, then the handler returns. A
 * plain value is still written to the held response, stored and replayed. A body Nest streams (a
 * web `Response`, a Node `Readable`) is never started for a closed socket, nor is Express's
 * `res.download()` from a `@Res()` handler: nothing is written. Until 2026-12-05 such a run was
 * never concluded: its key stayed in progress until `maxHoldSeconds`, then lapsed, and the
 * client's retry charged again (found by helper-70). Now a run whose handler returned is
 * completed without a body when its hold runs out, never left to lapse. Short lease and hold
 * only to keep the test fast.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, Module, Post, Res, StreamableFile } from '@nestjs/common';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defer } from 'rxjs';
import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import { listenApp } from '../fixtures/listen.js';
import { sendAndGiveUp } from '../fixtures/client-gone.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const charges = new Map<string, number>();
/** A card processor call that takes a while. */
async function chargeCard(ref: string) {
  charges.set(ref, (charges.get(ref) ?? 0) + 1);
  await sleep(400);
  return { id: `pay_${randomUUID()}`, ref, status: 'succeeded' };
}

@Controller('charges')
class ChargesController {
  @Post('json')
  @Idempotent()
  async json(@Body() body: { ref: string }) {
    return chargeCard(body.ref);
  }

  /** Nest 12 sends a web Response as the whole answer. */
  @Post('web')
  @Idempotent()
  async web(@Body() body: { ref: string }) {
    const receipt = await chargeCard(body.ref);
    return new Response(JSON.stringify(receipt), {
      status: 201,
      headers: { 'content-type': 'application/json' },
    });
  }

  /** A @Res() handler that sends the receipt file (Express res.download). */
  @Post('download')
  @Idempotent()
  async download(@Body() body: { ref: string }, @Res() res: any) {
    const receipt = await chargeCard(body.ref);
    const file = join(tmpdir(), `receipt-${receipt.id}.json`);
    writeFileSync(file, JSON.stringify(receipt));
    if (typeof res.download === 'function') res.download(file);
    else res.code(201).send(receipt);
  }

  /** An Observable handler (HttpService style): allowed to end completed without a body. */
  @Post('observable')
  @Idempotent()
  observable(@Body() body: { ref: string }) {
    return defer(() => chargeCard(body.ref));
  }

  @Post('file')
  @Idempotent()
  async file(@Body() body: { ref: string }) {
    const receipt = await chargeCard(body.ref);
    return new StreamableFile(Buffer.from(JSON.stringify(receipt)), { type: 'application/json' });
  }

  @Post('readable')
  @Idempotent()
  async readable(@Body() body: { ref: string }) {
    const receipt = await chargeCard(body.ref);
    return Readable.from([Buffer.from(JSON.stringify(receipt))]);
  }
}

/** Sends the request and resets the connection after `ms`, as a client timeout does. */

for (const platform of ['express', 'fastify'] as const) {
  describe(`client gone before a slow handler returns (${platform})`, () => {
    let db: MigratedDatabase;
    let url: string;
    let close: () => Promise<void>;

    beforeAll(async () => {
      db = await createMigratedDatabase('http_gone');
      @Module({
        imports: [
          IdempotencyModule.forRoot({
            dataSource: db.dataSource,
            cleanup: { enabled: false },
            leaseSeconds: 1,
            maxHoldSeconds: 2,
            singleCommitMaxSeconds: 2,
          }),
        ],
        controllers: [ChargesController],
      })
      class AppModule {}
      ({ url, close } = await listenApp(AppModule, platform));
    });
    afterAll(async () => {
      await close?.();
      await db?.drop();
    });

    for (const kind of ['json', 'web', 'file', 'readable', 'download', 'observable']) {
      it(`${kind}: the charge runs once; the key is concluded, never free for a second run`, async () => {
        const key = randomUUID();
        const ref = `${platform}-${kind}-${randomUUID()}`;
        await sendAndGiveUp(url, `/charges/${kind}`, key, { ref }, 150);
        // Past maxHoldSeconds + the lease: a key still in progress would have lapsed by then.
        await sleep(3_800);
        const [record] = await db.records('idempotency_key = $1', [key]);
        const retry = await send(url, `/charges/${kind}`, { key, body: { ref } });
        expect({ charges: charges.get(ref), retry: retry.status }).toEqual({
          charges: 1,
          retry: kind === 'json' || (kind === 'download' && platform === 'fastify') ? 201 : 409,
        });
        expect(record?.status).toBe('completed');
      }, 15_000);
    }
  });
}
