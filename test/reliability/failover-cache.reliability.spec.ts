/**
 * Asynchronous replication loses what the old primary acknowledged last. The replay cache must
 * not keep answering for it: once the app talks to another server (a connection-level failure,
 * or a new server identity on a new connection), the cache is dropped, and the key's answer is
 * what the surviving database says (here: the payment is gone, so it runs again, once).
 */
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { Controller, Headers, HttpCode, Module, Post } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { startFailoverCluster, type FailoverCluster } from '../fixtures/failover-cluster.js';
import { send, type RawResponse } from '../fixtures/http-client.js';
import { listenApp, type ListeningApp } from '../fixtures/listen.js';
import { waitFor } from './support.js';

function paymentsModule(dataSource: DataSource) {
  @Controller()
  class PaymentsController {
    @Post('payments')
    @HttpCode(201)
    @Idempotent()
    async pay(@Headers('idempotency-key') key: string) {
      const [row] = (await dataSource.query(
        'INSERT INTO payments (idempotency_key) VALUES ($1) RETURNING id',
        [key],
      )) as { id: string }[];
      // A sequence is not replicated past the cut either: the id alone may repeat.
      return { payment: `pay_${row.id}`, run: randomUUID() };
    }
  }
  @Module({
    imports: [IdempotencyModule.forRoot({ dataSource, cleanup: { enabled: false } })],
    controllers: [PaymentsController],
  })
  class PaymentsModule {}
  return PaymentsModule;
}

const replayed = (res: RawResponse) => res.headers['idempotent-replayed'] === 'true';

/**
 * `open`: the app's pool holds idle connections when the primary dies (they fail: a
 * connection-level failure). `closed`: they were all closed before (idle timeout), so the app
 * only learns of the failover from the new server's identity on its next connection.
 */
describe.each(['open', 'closed'] as const)(
  'replay cache across a failover with asynchronous replication (pool connections %s)',
  (connections) => {
    let cluster: FailoverCluster;
    let dataSource: DataSource;
    let app: ListeningApp;
    const pool = () => (dataSource.driver as unknown as { master: { totalCount: number } }).master;

    beforeEach(async () => {
      cluster = await startFailoverCluster(`cache_${connections}`, { synchronous: false });
      dataSource = new DataSource({
        type: 'postgres',
        url: cluster.url,
        poolErrorHandler: () => undefined,
        extra: { idleTimeoutMillis: connections === 'closed' ? 200 : 60_000 },
      });
      app = await listenApp(paymentsModule(dataSource));
    }, 60_000);
    afterEach(async () => {
      await app?.close();
      if (dataSource?.isInitialized) await dataSource.destroy();
      await cluster?.remove();
    }, 60_000);

    it('drops the cache, so a payment lost with the old primary is not replayed', async () => {
      const key = randomUUID();
      // Replication stops: what the primary commits from now on exists only there.
      await cluster.replication.cut();
      await waitFor(
        'the standby to stop streaming',
        async () => (await cluster.primary.query('SELECT 1 FROM pg_stat_replication')).length === 0,
        10_000,
      );
      const first = await send(app.url, '/payments', { key });
      expect(first.status).toBe(201);
      const closeIdle = () =>
        waitFor(
          'the pool to close its idle connections',
          async () => pool().totalCount === 0,
          10_000,
        );
      if (connections === 'closed') {
        // A new connection to the old primary: the app knows its identity before the failover.
        await closeIdle();
        expect((await send(app.url, '/payments', { key: randomUUID() })).status).toBe(201);
        expect(replayed(await send(app.url, '/payments', { key }))).toBe(true);
      }
      const cached = await send(app.url, '/payments', { key });
      expect(replayed(cached)).toBe(true);
      expect(cached.body.equals(first.body)).toBe(true);
      if (connections === 'closed') {
        await closeIdle();
      } else {
        expect(pool().totalCount).toBeGreaterThan(0);
      }

      await cluster.failover();
      const survivors = await cluster.standby.query(
        'SELECT count(*)::int AS n FROM payments WHERE idempotency_key = $1',
        [key],
        'payments',
      );
      expect(survivors[0].n).toBe(0); // the acknowledged payment went with the old primary

      // Another key first: the app's first connection to the new server.
      if (connections === 'closed')
        expect((await send(app.url, '/payments', { key: randomUUID() })).status).toBe(201);
      const after = await send(app.url, '/payments', { key });
      expect({ status: after.status, replayed: replayed(after) }).toEqual({
        status: 201,
        replayed: false,
      });
      expect(after.body.equals(first.body)).toBe(false);
      const payments = await cluster.standby.query(
        'SELECT count(*)::int AS n FROM payments WHERE idempotency_key = $1',
        [key],
        'payments',
      );
      expect(payments[0].n).toBe(1);
      // And from now on the key replays what the surviving database holds.
      const again = await send(app.url, '/payments', { key });
      expect(replayed(again)).toBe(true);
      expect(again.body.equals(after.body)).toBe(true);
    }, 60_000);
  },
);
