import { Body, Controller, Post } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { Idempotent } from 'nestjs-pg-idempotency';

@Controller('payments')
export class PaymentsController {
  @Post()
  @Idempotent({ required: true })
  charge(@Body() dto: { amount: number; currency: string }) {
    return { id: `pay_${randomUUID()}`, status: 'succeeded', ...dto };
  }
}
