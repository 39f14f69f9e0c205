import { Inject, Injectable, Logger } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { SAMPLE_OPTIONS, type SampleAppOptions, slowMsFromEnv } from '../sample.options.js';

export type AuthorizationOutcome =
  { outcome: 'approved' } | { outcome: 'declined'; code: 'card_declined'; declineCode: string };

/**
 * A fake card network that, like Stripe, deduplicates by the idempotency key its caller sends:
 * the first authorization of a key is final, a repeat answers it again without charging. Test tokens:
 *  - `tok_chargeDeclined`: declined (a business outcome: recorded, answered with 402, replayed)
 *  - `tok_slow`: approved after `slowMs` (lets duplicates see `409 request_in_progress`)
 *  - `tok_fail`: throws a plain Error, like a processor outage (500: the key is released)
 *  - anything else: approved
 */
@Injectable()
export class CardProcessor {
  private readonly logger = new Logger('CardProcessor');
  private readonly slowMs: number;
  /** The outcome of each idempotency key's first authorization. */
  private readonly outcomes = new Map<string, Promise<AuthorizationOutcome>>();
  /** Requests received per idempotency key (a repeat is not a charge). */
  readonly requests = new Map<string, number>();

  constructor(@Inject(SAMPLE_OPTIONS) options: SampleAppOptions) {
    this.slowMs = options.slowMs ?? slowMsFromEnv();
  }

  authorize(
    idempotencyKey: string,
    source: string,
    amount: number,
    currency: string,
  ): Promise<AuthorizationOutcome> {
    this.requests.set(idempotencyKey, (this.requests.get(idempotencyKey) ?? 0) + 1);
    let outcome = this.outcomes.get(idempotencyKey);
    if (!outcome) {
      outcome = this.charge(source, amount, currency);
      this.outcomes.set(idempotencyKey, outcome);
      // An outage charged nothing: the key may be tried again.
      outcome.catch(() => this.outcomes.delete(idempotencyKey));
    }
    return outcome;
  }

  /** How many charges were made under the key (0 or 1). */
  chargesFor(idempotencyKey: string): number {
    return this.outcomes.has(idempotencyKey) ? 1 : 0;
  }

  private async charge(
    source: string,
    amount: number,
    currency: string,
  ): Promise<AuthorizationOutcome> {
    switch (source) {
      case 'tok_chargeDeclined':
        return { outcome: 'declined', code: 'card_declined', declineCode: 'generic_decline' };
      case 'tok_slow':
        this.logger.log(`tok_slow: holding ${amount} ${currency} for ${this.slowMs} ms`);
        await sleep(this.slowMs);
        return { outcome: 'approved' };
      case 'tok_fail':
        throw new Error('card processor unreachable (tok_fail)');
      default:
        return { outcome: 'approved' };
    }
  }
}
