import { Inject, Injectable, Logger } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { SAMPLE_OPTIONS, type SampleAppOptions, slowMsFromEnv } from '../sample.options.js';

export type AuthorizationOutcome =
  { outcome: 'approved' } | { outcome: 'declined'; code: 'card_declined'; declineCode: string };

/**
 * A fake card network. Test tokens:
 *  - `tok_chargeDeclined`: declined (a business outcome: recorded, answered with 402, replayed)
 *  - `tok_slow`: approved after `slowMs` (lets duplicates see `409 request_in_progress`)
 *  - `tok_fail`: throws a plain Error, like a processor outage (500: the key is released)
 *  - anything else: approved
 */
@Injectable()
export class CardProcessor {
  private readonly logger = new Logger('CardProcessor');
  private readonly slowMs: number;

  constructor(@Inject(SAMPLE_OPTIONS) options: SampleAppOptions) {
    this.slowMs = options.slowMs ?? slowMsFromEnv();
  }

  async authorize(source: string, amount: number, currency: string): Promise<AuthorizationOutcome> {
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
