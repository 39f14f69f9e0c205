/**
 * A Nest app on `forRoot({ pool, transactions })` whose transactional handlers write a note
 * through the tool's own API (`idem.manager`), on a fresh migrated database. Every statement the
 * pool's connections send is recorded, and which of them went out pipelined (in the round trip
 * of the statement before), as test/e2e/round-trips.e2e.spec.ts counts them.
 */
import { Body, Controller, Module, Post } from '@nestjs/common';
import pg from 'pg';
import {
  Idempotent,
  IdempotencyCtx,
  IdempotencyModule,
  migrate,
  type IdempotencyContext,
  type TransactionAdapterLike,
} from '../../../lib/index.js';
import { createTestDatabase } from '../../harness/test-database.js';
import { listenApp, type ListeningApp } from '../../fixtures/listen.js';

export interface NoteBody {
  id: string;
  then?: 'throw';
}

export interface ModuleApp extends ListeningApp {
  pool: pg.Pool;
  /** Statements sent since the last `sent.length = 0`. */
  sent: string[];
  /** Indexes into `sent` of the statements sent pipelined. */
  pipelined: number[];
  /** Handler runs so far. */
  runs(): number;
  stop(): Promise<void>;
}

function notesController<M>(insert: (manager: M, id: string) => Promise<void>) {
  let runs = 0;
  const write = async (body: NoteBody, idem: IdempotencyContext<M>) => {
    await insert(idem.manager!, body.id);
    if (body.then === 'throw') throw new Error('failed after the write');
    return { id: body.id, run: ++runs };
  };
  @Controller()
  class NotesController {
    @Post('tx')
    @Idempotent({ transactional: true })
    tx(@Body() body: NoteBody, @IdempotencyCtx() idem: IdempotencyContext<M>) {
      return write(body, idem);
    }

    @Post('single')
    @Idempotent({ transactional: 'single' })
    single(@Body() body: NoteBody, @IdempotencyCtx() idem: IdempotencyContext<M>) {
      return write(body, idem);
    }
  }
  return { NotesController, runs: () => runs };
}

/**
 * Wraps `query` of every client the pool hands out as a promise (the store's checkouts),
 * recording what it sends; `pool.query()` (the test's own checks) checks out by callback, unseen.
 */
function recordStatements(pool: pg.Pool, sent: string[], pipelined: number[]): void {
  const counted = new WeakSet<object>();
  const connect = pool.connect.bind(pool) as (...a: unknown[]) => Promise<pg.PoolClient>;
  pool.connect = (async (...args: unknown[]) => {
    if (args.length) return connect(...args);
    const client = await connect();
    if (!counted.has(client)) {
      counted.add(client);
      const query = client.query.bind(client) as (...a: unknown[]) => unknown;
      client.query = ((config: string | pg.QueryConfig, ...rest: unknown[]) => {
        sent.push(typeof config === 'string' ? config : config.text);
        if ((client as unknown as { pipeline?: boolean }).pipeline) pipelined.push(sent.length - 1);
        return query(config, ...rest);
      }) as typeof client.query;
    }
    return client;
  }) as typeof pool.connect;
}

export async function startModuleApp<M>(
  tool: string,
  transactions: TransactionAdapterLike<M>,
  insert: (manager: M, id: string) => Promise<void>,
): Promise<ModuleApp> {
  const db = await createTestDatabase(`module_${tool}`);
  const pool = new pg.Pool({ connectionString: db.url, max: 4 });
  await migrate(pool);
  await pool.query('CREATE TABLE notes (id text PRIMARY KEY, body text NOT NULL)');
  const sent: string[] = [];
  const pipelined: number[] = [];
  recordStatements(pool, sent, pipelined);
  const { NotesController, runs } = notesController(insert);
  @Module({
    imports: [
      IdempotencyModule.forRoot({
        pool,
        transactions,
        replayCache: false,
        replayAuditFlushMs: 3_600_000,
        cleanup: { enabled: false },
      }),
    ],
    controllers: [NotesController],
  })
  class NotesModule {}
  const listening = await listenApp(NotesModule);
  return {
    ...listening,
    pool,
    sent,
    pipelined,
    runs,
    async stop() {
      await listening.close();
      await pool.end();
      await db.drop();
    },
  };
}
