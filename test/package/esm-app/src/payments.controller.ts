import { Body, Controller, Headers, Post } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { Idempotent, IdempotencyCtx, type IdempotencyContext } from 'nestjs-pg-idempotency';
import { PaymentEntity } from './payment.entity.js';

@Controller('payments')
export class PaymentsController {
  @Post()
  @Idempotent({ required: true, transactional: true })
  async charge(
    @Body() dto: { id?: string; amount: number; currency?: string },
    @Headers('x-fail') fail: string | undefined,
    // No type argument: a TypeORM EntityManager, as before adapters existed.
    @IdempotencyCtx() idem: IdempotencyContext,
  ) {
    const id = dto.id ?? `pay_${randomUUID()}`;
    const payment = await idem.manager!.save(PaymentEntity, { id, amount: dto.amount });
    // X-Fail: a failure after the write, which must roll it back and free the key.
    if (fail) throw new Error('declined after the payment was written');
    return { status: 'succeeded', ...dto, ...payment };
  }
}
