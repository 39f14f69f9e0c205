import { Body, Controller, Post } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { Idempotent } from 'nestjs-pg-idempotency';

@Controller('payments')
export class PaymentsController {
  @Post()
  @Idempotent({ required: true, transactionId: (body: any) => body?.id })
  charge(@Body() dto: { amount: number; currency: string }) {
    // Runs once per key; retries get this very response back.
    return { id: `pay_${randomUUID()}`, status: 'succeeded', ...dto };
  }
}
