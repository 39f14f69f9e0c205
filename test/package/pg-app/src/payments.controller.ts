import { Body, Controller, Headers, Post } from '@nestjs/common';
import { Idempotent, IdempotencyCtx, type IdempotencyContext } from 'nestjs-pg-idempotency';
import type { Payment } from './payment.js';
import { writePayment, type Manager } from './payments.tool.js';

/** Shared by drizzle-app and prisma-app: each writes through its own tool (payments.tool.ts). */
@Controller('payments')
export class PaymentsController {
  @Post()
  @Idempotent({ required: true, transactional: true })
  async charge(
    @Body() body: Payment,
    @Headers('x-fail') fail: string | undefined,
    @IdempotencyCtx() idem: IdempotencyContext<Manager>,
  ) {
    const payment = await writePayment(idem.manager!, { id: body.id, amount: body.amount });
    // X-Fail: a failure after the write, which must roll it back and free the key.
    if (fail) throw new Error('declined after the payment was written');
    return payment;
  }
}
