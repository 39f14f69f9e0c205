/**
 * An RPC call's scope is the pattern it was routed by, on every transport the NestJS docs set up:
 * Redis (getChannel), MQTT (getTopic) and NATS (getSubject) have no getPattern(), and the scope
 * fell back to `<Class>.<method>`, so two feature modules' `ChargeHandler.charge` were one
 * operation: the wallet charge was answered with the card charge's receipt and never ran. Event
 * handlers: NATS dropped the handler from the scope (one of an event's handlers never ran), and
 * two same-named classes on one event are refused at start-up. Found by helper-62. A wildcard
 * handler and an exact one of the same name got one scope, two wrapped methods of one class
 * read as one (`''`), and `'"charge"'` was another scope than `charge`: found by helper-63.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, type INestMicroservice, Module, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import {
  type ClientProxy,
  ClientProxyFactory,
  EventPattern,
  MessagePattern,
  NatsContext,
  NatsRecordBuilder,
  Ctx,
  Payload,
  Transport,
} from '@nestjs/microservices';
import { headers as natsHeaders } from '@nats-io/transport-node';
import { randomUUID } from 'node:crypto';
import { firstValueFrom, timeout } from 'rxjs';
import { Idempotent, IdempotencyModule, type IdempotentOptions } from '../../lib/index.js';
import { bootError } from '../fixtures/boot-error.js';
import { freePort } from '../fixtures/free-port.js';
import { sendTcpMessage } from '../fixtures/tcp-message.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';

const runs: string[] = [];
const suffix = randomUUID().slice(0, 8);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A feature module's own `ChargeHandler` (the same class name in each module). */
function chargeModule(pattern: string, source: string): Type {
  @Controller()
  class ChargeHandler {
    @MessagePattern(pattern)
    @Idempotent()
    charge(@Payload() d: { amount: number }) {
      runs.push(source);
      return { source, amount: d.amount };
    }
  }
  @Module({ controllers: [ChargeHandler] })
  class FeatureModule {}
  return FeatureModule;
}

/** A feature module's own `OrderCreatedHandler` for one event (or a class named `className`). */
function eventModule(
  pattern: string,
  source: string,
  options: IdempotentOptions = {},
  className?: string,
): Type {
  @Controller()
  class OrderCreatedHandler {
    @EventPattern(pattern)
    @Idempotent(options)
    async handle(@Payload() data: unknown) {
      runs.push(`${source}:${(data as { n: number }).n}`);
      await sleep(20);
    }
  }
  if (className) Object.defineProperty(OrderCreatedHandler, 'name', { value: className });
  @Module({ controllers: [OrderCreatedHandler] })
  class FeatureModule {}
  return FeatureModule;
}

async function start(
  db: MigratedDatabase,
  features: Type[],
  transport: Transport,
  options: object,
) {
  @Module({
    imports: [
      IdempotencyModule.forRoot({ dataSource: db.dataSource, cleanup: { enabled: false } }),
      ...features,
    ],
  })
  class AppModule {}
  const server: INestMicroservice = await NestFactory.createMicroservice(AppModule, {
    transport,
    options,
    logger: false,
  } as never);
  await server.listen();
  const client: ClientProxy = ClientProxyFactory.create({ transport, options } as {
    transport: Transport.TCP;
  });
  await client.connect();
  return {
    server,
    client,
    close: async () => {
      await client.close();
      await server.close();
    },
  };
}

let db: MigratedDatabase;
beforeAll(async () => {
  db = await createMigratedDatabase('rpc_scopes');
});
afterAll(() => db?.drop());

const transports = [
  ['Redis', Transport.REDIS, async () => ({ host: '127.0.0.1', port: 6379 })],
  ['MQTT', Transport.MQTT, async () => ({ url: 'mqtt://127.0.0.1:1883' })],
  ['NATS', Transport.NATS, async () => ({ servers: ['nats://127.0.0.1:4222'] })],
  ['TCP', Transport.TCP, async () => ({ host: '127.0.0.1', port: await freePort() })],
] as const;

describe.each(transports)(
  '%s: two same-named handlers on two patterns',
  (name, transport, options) => {
    const cards = `scopes.${name}.cards.charge.${suffix}`;
    const wallet = `scopes.${name}.wallet.charge.${suffix}`;
    let app: Awaited<ReturnType<typeof start>>;
    beforeAll(async () => {
      app = await start(db, [chargeModule(cards, 'card'), chargeModule(wallet, 'wallet')], transport, await options()); // prettier-ignore
    });
    afterAll(() => app?.close());

    it('are two operations: the wallet is charged, never answered with the card receipt', async () => {
      runs.length = 0;
      const idempotencyKey = randomUUID();
      const send = (pattern: string) =>
        firstValueFrom(app.client.send(pattern, { amount: 5, idempotencyKey }).pipe(timeout(5000)));
      expect(await send(cards)).toEqual({ source: 'card', amount: 5 });
      expect(await send(wallet)).toEqual({ source: 'wallet', amount: 5 });
      expect(await send(wallet)).toEqual({ source: 'wallet', amount: 5 });
      expect(runs).toEqual(['card', 'wallet']);
      const rows = await db.records('idempotency_key = $1', [idempotencyKey]);
      expect(rows.map((r) => r.endpoint).sort()).toEqual([`RPC ${cards}`, `RPC ${wallet}`]);
    });
  },
);

describe('NATS: one event, two handlers', () => {
  const event = `scopes.nats.order.${suffix}`;
  let app: Awaited<ReturnType<typeof start>>;
  beforeAll(async () => {
    const features = [eventModule(event, 'billing', {}, 'BillingHandler'), eventModule(event, 'email', {}, 'EmailHandler')]; // prettier-ignore
    app = await start(db, features, Transport.NATS, { servers: ['nats://127.0.0.1:4222'] });
  });
  afterAll(() => app?.close());

  const ranBoth = async (n: number) => {
    for (let waited = 0; waited < 5000 && runs.filter((r) => r.endsWith(`:${n}`)).length < 2; waited += 50) await sleep(50); // prettier-ignore
    await sleep(200);
    return runs.filter((r) => r.endsWith(`:${n}`)).sort();
  };

  it('each handler runs once, the key in a NATS header', async () => {
    const headers = natsHeaders();
    headers.set('Idempotency-Key', randomUUID());
    const message = new NatsRecordBuilder({ n: 1 }).setHeaders(headers).build();
    await firstValueFrom(app.client.emit(event, message));
    await firstValueFrom(app.client.emit(event, message));
    expect(await ranBoth(1)).toEqual(['billing:1', 'email:1']);
  });

  it('each handler runs once, the key in the payload', async () => {
    const data = { n: 2, idempotencyKey: randomUUID() };
    await firstValueFrom(app.client.emit(event, data));
    await firstValueFrom(app.client.emit(event, data));
    expect(await ranBoth(2)).toEqual(['billing:2', 'email:2']);
  });
});

describe('two same-named event handler classes on one event', () => {
  const event = `scopes.tcp.order.${suffix}`;

  it('are refused at start-up, naming the way out', async () => {
    const options = { host: '127.0.0.1', port: await freePort() };
    const features = [eventModule(event, 'billing'), eventModule(event, 'shipping')];
    const message = await bootError(start(db, features, Transport.TCP, options));
    expect(message).toContain('OrderCreatedHandler.handle');
    expect(message).toContain('@Idempotent({ endpoint:');
  });

  it('each run once when one is given its own endpoint', async () => {
    const options = { host: '127.0.0.1', port: await freePort() };
    const features = [eventModule(event, 'billing', { endpoint: `billing ${event}` }), eventModule(event, 'shipping')]; // prettier-ignore
    const app = await start(db, features, Transport.TCP, options);
    try {
      const data = { n: 3, idempotencyKey: randomUUID() };
      await firstValueFrom(app.client.emit(event, data));
      await firstValueFrom(app.client.emit(event, data));
      for (let waited = 0; waited < 5000 && runs.filter((r) => r.endsWith(':3')).length < 2; waited += 50) await sleep(50); // prettier-ignore
      await sleep(200);
      expect(runs.filter((r) => r.endsWith(':3')).sort()).toEqual(['billing:3', 'shipping:3']);
    } finally {
      await app.close();
    }
  });
});

describe.each([
  ['NATS', Transport.NATS, { servers: ['nats://127.0.0.1:4222'] }, '*'],
  ['Redis', Transport.REDIS, { host: '127.0.0.1', port: 6379, wildcards: true }, '*'],
] as const)('%s: a wildcard and an exact handler of one name', (name, transport, options, star) => {
  const base = `scopes.${name}.wild.${suffix}`;
  let app: Awaited<ReturnType<typeof start>>;
  beforeAll(async () => {
    const features = [eventModule(`${base}.${star}`, 'audit'), eventModule(`${base}.created`, 'billing')]; // prettier-ignore
    app = await start(db, features, transport, options);
  });
  afterAll(() => app?.close());

  it('each run once for one event', async () => {
    const data = { n: 4, idempotencyKey: randomUUID() };
    await firstValueFrom(app.client.emit(`${base}.created`, data));
    await firstValueFrom(app.client.emit(`${base}.created`, data));
    for (let waited = 0; waited < 5000 && runs.filter((r) => r.endsWith(':4')).length < 2; waited += 50) await sleep(50); // prettier-ignore
    await sleep(300);
    expect(runs.filter((r) => r.endsWith(':4')).sort()).toEqual(['audit:4', 'billing:4']);
    runs.length = 0;
  });
});

/** A typical wrapping decorator: the method becomes an anonymous function. */
const logged = (_target: object, _key: string, descriptor: PropertyDescriptor) => {
  const original = descriptor.value as (...args: unknown[]) => unknown;
  descriptor.value = function (this: unknown, ...args: unknown[]) {
    return original.apply(this, args);
  };
};

describe('TCP: two wrapped event handlers of one class, and a pattern sent in two spellings', () => {
  const event = `scopes.tcp.wrapped.${suffix}`;
  let app: Awaited<ReturnType<typeof start>>;
  let port: number;
  beforeAll(async () => {
    @Controller()
    class OrderEvents {
      @EventPattern(event)
      @Idempotent()
      @logged
      bill(@Payload() data: unknown) {
        runs.push(`bill:${(data as { n: number }).n}`);
      }

      @EventPattern(event)
      @Idempotent()
      @logged
      email(@Payload() data: unknown) {
        runs.push(`email:${(data as { n: number }).n}`);
      }

      @MessagePattern('scopes.spelled')
      @Idempotent()
      charge() {
        runs.push('spelled');
        return { charged: runs.filter((r) => r === 'spelled').length };
      }
    }
    @Module({ controllers: [OrderEvents] })
    class FeatureModule {}
    port = await freePort();
    app = await start(db, [FeatureModule], Transport.TCP, { host: '127.0.0.1', port });
  });
  afterAll(() => app?.close());

  it('each wrapped handler runs once', async () => {
    const data = { n: 5, idempotencyKey: randomUUID() };
    await firstValueFrom(app.client.emit(event, data));
    await firstValueFrom(app.client.emit(event, data));
    for (let waited = 0; waited < 5000 && runs.filter((r) => r.endsWith(':5')).length < 2; waited += 50) await sleep(50); // prettier-ignore
    await sleep(300);
    expect(runs.filter((r) => r.endsWith(':5')).sort()).toEqual(['bill:5', 'email:5']);
  });

  it('a pattern sent as a JSON string is the same operation', async () => {
    const idempotencyKey = randomUUID();
    const first = await sendTcpMessage(port, 'scopes.spelled', { idempotencyKey });
    const again = await sendTcpMessage(port, '"scopes.spelled"', { idempotencyKey });
    expect(again.response).toEqual(first.response);
    expect(runs.filter((r) => r === 'spelled')).toHaveLength(1);
  });
});

describe('NATS: subjects are routes, never parsed', () => {
  const base = `${Date.now() % 1000}`; // an all-numeric subject
  let app: Awaited<ReturnType<typeof start>>;
  beforeAll(async () => {
    @Controller()
    class Accounts {
      @MessagePattern(`${base}.*`)
      @Idempotent()
      charge(@Payload() data: unknown, @Ctx() context: NatsContext) {
        runs.push(`account:${context.getSubject()}`);
        return { account: context.getSubject(), amount: (data as { amount: number }).amount };
      }
    }
    @Module({ controllers: [Accounts] })
    class FeatureModule {}
    app = await start(db, [FeatureModule], Transport.NATS, { servers: ['nats://127.0.0.1:4222'] });
  });
  afterAll(() => app?.close());

  it('795.5 and 795.50 are two subjects: each charged, never answered with the other (found by helper-65)', async () => {
    const idempotencyKey = randomUUID();
    const send = (subject: string) =>
      firstValueFrom(app.client.send(subject, { amount: 3, idempotencyKey }).pipe(timeout(5000)));
    expect(await send(`${base}.5`)).toEqual({ account: `${base}.5`, amount: 3 });
    expect(await send(`${base}.50`)).toEqual({ account: `${base}.50`, amount: 3 });
  });
});

it('a RegExp pattern (Kafka) starts and is scoped by its text (found by helper-65)', async () => {
  const options = { host: '127.0.0.1', port: await freePort() };
  const app = await start(db, [eventModule(/scopes\.regexp\..+/ as never, 'regexp')], Transport.TCP, options); // prettier-ignore
  await app.close();
});
