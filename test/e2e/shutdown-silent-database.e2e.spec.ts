/**
 * attack-81: a SIGTERM / app.close() while PostgreSQL has gone silent (a hung server, a
 * partition: sockets open, nothing answers), after renewals went on the store's own connection
 * (the pool was held). The shutdown ends that connection: pg's Client.end() waits for a socket
 * close a silent peer never sends, so app.close() never returned (the pod is SIGKILLed before the
 * app's own shutdown code runs). It is now ended within statementTimeoutMs.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { randomUUID } from 'node:crypto';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import { TcpProxy } from '../fixtures/tcp-proxy.js';
import { refundsController, shortLeaseApp, sleep } from '../fixtures/lease-app.js';

describe('app.close() while the database is silent', () => {
  let db: MigratedDatabase;
  let proxy: TcpProxy;
  let pool: pg.Pool;

  beforeAll(async () => {
    db = await createMigratedDatabase('lease_silent');
    proxy = TcpProxy.forUrl(db.url);
    await proxy.start();
  });
  afterAll(async () => {
    await proxy?.stop();
    await pool?.end().catch(() => undefined);
    await db?.drop();
  });

  it('returns once no run is in flight, as before the lease connection', async () => {
    pool = new pg.Pool({ connectionString: proxy.wrap(db.url), max: 1 });
    pool.on('error', () => undefined);
    // The processor: two renewals (every second of a 3 s lease).
    const { nest, url } = await shortLeaseApp({ pool }, [refundsController(2_500)]);
    const answer = send(url, '/refunds', { key: randomUUID(), body: { ref: 'r1' } });
    await sleep(300); // claimed; the app's own work holds the pool while the refund runs
    const held = await pool.connect();
    const opened = async () =>
      (
        await db.dataSource.query(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'UPDATE%locked_until%'`,
        )
      )[0].n;
    await sleep(1_900); // renewals at 1 s and 2 s, on the store's own connection
    const renewedOnOwn = await opened();
    held.release();
    const res = await answer;
    expect({ status: res.status, renewedOnOwn }).toEqual({ status: 201, renewedOnOwn: 1 });

    proxy.blackhole(); // the database stops answering; SIGTERM comes
    const started = performance.now();
    const closed = await Promise.race([
      nest.close().then(() => 'closed'),
      sleep(15_000).then(() => 'still closing after 15 s'),
    ]);
    expect({
      closed,
      withinMs: closed === 'closed' && performance.now() - started < 5_000,
    }).toEqual({
      closed: 'closed',
      withinMs: true,
    });
  }, 40_000);
});
