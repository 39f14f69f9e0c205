/**
 * A server (or a role, or PgBouncer's max_client_conn) sized for the app's pools alone: renewals
 * keep working on the pool's idle connections, and never need the store's own connection, which
 * the server would refuse (attack-80: with renewals always on it, every one failed).
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { PostgresIdempotencyStore } from '../../lib/index.js';
import { idempotencyMigrations } from '../../migrations/index.js';
import { PgServer } from '../fixtures/pg-cluster.js';

let server: PgServer;
beforeAll(async () => {
  server = await PgServer.initPrimary('a80_maxconn', {
    max_connections: 5,
    superuser_reserved_connections: 0,
  });
  await server.query('CREATE DATABASE app');
  const migrate = new DataSource({
    type: 'postgres',
    url: server.url('app'),
    migrations: idempotencyMigrations,
  });
  await migrate.initialize();
  await migrate.runMigrations();
  await migrate.destroy();
}, 120_000);
afterAll(async () => server?.remove(), 60_000);

it('renews a lease while the app pool has idle connections and the server has no spare slot', async () => {
  const pool = new pg.Pool({ connectionString: server.url('app'), max: 5 });
  const store = new PostgresIdempotencyStore<unknown>(pool, 'idempotency_keys', {
    statementTimeoutMs: 2_000,
  });
  try {
    // The pool opens every connection the server allows (max_connections = pool max), then idles.
    const warm = await Promise.all([1, 2, 3, 4, 5].map(() => pool.connect()));
    warm.forEach((c) => c.release());
    const claim = await store.claim({
      key: randomUUID(),
      endpoint: 'POST /charges',
      userId: '',
      requestHash: 'a'.repeat(64),
      ttlSeconds: 60,
      leaseSeconds: 6,
    });
    if (claim.type !== 'claimed') throw new Error(claim.type);
    const renewals: string[] = [];
    for (let i = 0; i < 3; i++) {
      renewals.push(
        await store.renew(claim.lease, 6).then(
          (held) => String(held),
          (err: Error) => err.message,
        ),
      );
    }
    expect({ idle: pool.idleCount, renewals }).toEqual({
      idle: 5,
      renewals: ['true', 'true', 'true'],
    });
  } finally {
    await store.close();
    await pool.end();
  }
}, 60_000);
