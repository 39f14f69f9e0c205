import { createServer, type Server } from 'node:http';

/**
 * A card processor on loopback that deduplicates by the `Idempotency-Key` header, like Stripe:
 * the first request of a key charges, later ones answer the same charge. Counts both.
 */
export class FakeCardProcessor {
  /** Requests received, by key. */
  readonly calls = new Map<string, number>();
  /** Charges made, by key: more than one would be a double charge. */
  readonly charges = new Map<string, { id: string }[]>();
  private server?: Server;
  private seq = 0;
  url = '';

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      const key = String(req.headers['idempotency-key'] ?? '');
      req.resume();
      req.on('end', () => {
        this.calls.set(key, (this.calls.get(key) ?? 0) + 1);
        let made = this.charges.get(key);
        if (!key || !made) {
          made = [...(made ?? []), { id: `ch_${++this.seq}` }];
          this.charges.set(key, made);
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(made[0]));
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    const address = this.server.address() as { port: number };
    this.url = `http://127.0.0.1:${address.port}`;
  }

  /** Every key it saw during `fn`, with how often it charged and was called for each. */
  keysSince(before: ReadonlySet<string>): string[] {
    return [...this.calls.keys()].filter((key) => !before.has(key));
  }

  stop(): Promise<void> {
    return new Promise((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
