/**
 * What every variant server shares: the pg pool, the bench controller (one real INSERT per
 * request) and the bootstrap that reports the port to the runner over IPC.
 */
import 'reflect-metadata';
import {
  Body,
  Controller,
  Module,
  type NestInterceptor,
  Post,
  Req,
  type Type,
  UseInterceptors,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import pg from 'pg';
import { DataSource } from 'typeorm';

export const KEY_HEADER = 'idempotency-key';
export const SLOW_MS = 50;

/** Anything with `query(text, values)`: a pg pool or client, a TypeORM EntityManager or QueryRunner. */
export interface Queryable {
  query(text: string, values: unknown[]): Promise<unknown>;
}

/** Performs the handler's INSERT; returns the new row id. */
export type InsertPayment = (req: BenchRequest, amount: number) => Promise<string>;

export interface BenchRequest {
  headers: Record<string, string | string[] | undefined>;
  res?: { setHeader(name: string, value: string): void };
}

export function env(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set (variants are started by bench/run.ts)`);
  return value;
}

export const poolSize = () => Number(process.env.BENCH_POOL_SIZE ?? 10);

export function createPool(): pg.Pool {
  return new pg.Pool({ connectionString: env('DATABASE_URL'), max: poolSize() });
}

const INSERT = `INSERT INTO bench_payments (idempotency_key, amount, variant) VALUES ($1, $2, $3) RETURNING id`;

/** The one real write of every handler. */
export async function insertPayment(
  db: Queryable,
  req: BenchRequest,
  amount: number,
  variant: string,
) {
  const key = req.headers[KEY_HEADER];
  const result = await db.query(INSERT, [typeof key === 'string' ? key : null, amount, variant]);
  // pg returns a Result ({ rows }); TypeORM's query() returns the rows themselves.
  const rows = (Array.isArray(result) ? result : (result as { rows: unknown[] }).rows) as {
    id: string;
  }[];
  return String(rows[0].id);
}

const noDecorator = (): MethodDecorator => () => undefined;

/**
 * `POST /payments` and `POST /slow` carry the variant's idempotency decorator;
 * `POST /plain` never does.
 */
export function benchController(
  insert: InsertPayment,
  idempotent: () => MethodDecorator = noDecorator,
) {
  const reply = async (req: BenchRequest, body: { amount?: number }) => {
    const amount = Number(body?.amount ?? 0);
    return { id: await insert(req, amount), amount, status: 'succeeded' };
  };

  @Controller()
  class BenchController {
    @Post('payments')
    @idempotent()
    payments(@Req() req: BenchRequest, @Body() body: { amount?: number }) {
      return reply(req, body);
    }

    @Post('plain')
    plain(@Req() req: BenchRequest, @Body() body: { amount?: number }) {
      return reply(req, body);
    }

    @Post('slow')
    @idempotent()
    async slow(@Req() req: BenchRequest, @Body() body: { amount?: number }) {
      await new Promise((resolve) => setTimeout(resolve, SLOW_MS));
      return reply(req, body);
    }
  }
  return BenchController;
}

export interface CloseHooks {
  beforeClose?: () => Promise<unknown>;
  afterClose?: () => Promise<unknown>;
}

/** Starts the app on a free loopback port, tells the runner, and closes on SIGTERM. */
export async function serve(module: Type, hooks: CloseHooks = {}): Promise<void> {
  const app = await NestFactory.create(module, new ExpressAdapter(), { logger: ['error', 'warn'] });
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as { port: number };
  let closing = false;
  const close = async () => {
    if (closing) return;
    closing = true;
    await hooks.beforeClose?.().catch(() => undefined);
    await app.close().catch(() => undefined);
    await hooks.afterClose?.().catch(() => undefined);
    process.exit(0);
  };
  process.once('SIGTERM', close);
  process.once('disconnect', close);
  process.send?.({ type: 'ready', port });
}

/**
 * A variant whose idempotency is one interceptor instance on its own pg pool (the hand-written
 * floors and rulers): the handler writes through the same pool, which closes after the app.
 */
export async function serveBehindInterceptor(
  variant: string,
  interceptorOn: (pool: pg.Pool) => NestInterceptor,
): Promise<void> {
  const pool = createPool();
  const interceptor = interceptorOn(pool);

  @Module({
    controllers: [
      benchController(
        (req, amount) => insertPayment(pool, req, amount, variant),
        () => UseInterceptors(interceptor),
      ),
    ],
  })
  class InterceptedModule {}

  await serve(InterceptedModule, { afterClose: () => pool.end() });
}

/**
 * The TypeORM library variants' DataSource, initialized, and the pg pool inside it: the handler writes
 * through the same pool the library uses, as the other variants do through theirs.
 */
export async function libraryDataSource(): Promise<LibraryStorage<{ dataSource: DataSource }>> {
  const dataSource = new DataSource({
    type: 'postgres',
    url: env('DATABASE_URL'),
    extra: { max: poolSize() },
  });
  await dataSource.initialize();
  const pool = (dataSource.driver as unknown as { master: pg.Pool }).master;
  return { storage: { dataSource }, pool, close: () => dataSource.destroy() };
}

/** The plain-driver variants' storage: the bench's own pg pool, passed as `forRoot({ pool })` (no TypeORM). */
export async function libraryPool(): Promise<LibraryStorage<{ pool: pg.Pool }>> {
  const pool = createPool();
  return { storage: { pool }, pool, close: () => pool.end() };
}

/** What `forRoot()` gets (`{ dataSource }` or `{ pool }`), the pool the handler writes through, and how to close it. */
export interface LibraryStorage<T> {
  storage: T;
  pool: pg.Pool;
  close: () => Promise<unknown>;
}

/** Module defaults unless a run asks otherwise (`BENCH_REPLAY_AUDIT=off`, `BENCH_REPLAY_CACHE=off`), to measure what each costs. */
export function optionsFromEnv(): { replayAudit?: 'off'; replayCache?: false } {
  return {
    ...(process.env.BENCH_REPLAY_AUDIT === 'off' && { replayAudit: 'off' as const }),
    ...(process.env.BENCH_REPLAY_CACHE === 'off' && { replayCache: false as const }),
  };
}
