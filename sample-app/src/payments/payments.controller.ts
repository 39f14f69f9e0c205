import {
  Body,
  Controller,
  DefaultValuePipe,
  Get,
  Param,
  ParseIntPipe,
  Post,
  Query,
} from '@nestjs/common';
import { Idempotent, IdempotencyContext, IdempotencyCtx } from '../../../lib/index.js';
import { CurrentUser, type SampleUser } from '../auth/bearer-auth.guard.js';
import { apiError } from './api-errors.js';
import type { Ledger } from './ledger.js';
import { CreatePaymentDto, CreateRefundDto } from './payments.dto.js';
import { PaymentsService } from './payments.service.js';
import { paymentView, refundView } from './views.js';

/** The record's transaction id is the created object's `id` (`pay_...` / `re_...`). */
const transactionId = (body: unknown) => (body as { id?: string } | null)?.id;

@Controller('payments')
export class PaymentsController {
  constructor(private readonly payments: PaymentsService) {}

  @Post()
  @Idempotent({ required: true, transactional: true, transactionId })
  async create(
    @CurrentUser() user: SampleUser,
    @Body() dto: CreatePaymentDto,
    @IdempotencyCtx() idem: IdempotencyContext<Ledger>,
  ) {
    // `required: true` and `transactional: true`: there is always a key, so always a context, and
    // `idem.manager` is the Ledger on the transaction that also completes the idempotency record.
    // A re-run after a crash (the lease ended before the completion) sends the processor the same
    // derived key: no second charge.
    const payment = await this.payments.charge(idem.manager!, user.id, dto, idem.keyFor('charge'));
    if (payment.status === 'declined') {
      // The decline is a final answer: recorded in the ledger, stored and replayed as this 402.
      // Its body has no `id`, so link the record to the declined payment explicitly.
      idem.setTransactionId(payment.id);
      throw apiError(402, {
        type: 'card_error',
        code: 'card_declined',
        decline_code: 'generic_decline',
        message: 'Your card was declined.',
        payment: payment.id,
      });
    }
    return paymentView(payment);
  }

  @Post(':id/refunds')
  @Idempotent({ required: true, transactional: true, transactionId })
  async refund(
    @CurrentUser() user: SampleUser,
    @Param('id') paymentId: string,
    @Body() dto: CreateRefundDto,
    @IdempotencyCtx() idem: IdempotencyContext<Ledger>,
  ) {
    return refundView(await this.payments.refund(idem.manager!, user.id, paymentId, dto.amount));
  }

  @Get()
  async list(
    @CurrentUser() user: SampleUser,
    @Query('limit', new DefaultValuePipe(20), ParseIntPipe) limit: number,
  ) {
    const payments = await this.payments.list(user.id, Math.min(Math.max(limit, 1), 100));
    return { object: 'list', data: payments.map((p) => paymentView(p)) };
  }

  @Get(':id')
  async get(@CurrentUser() user: SampleUser, @Param('id') id: string) {
    const { payment, refunds } = await this.payments.get(user.id, id);
    return paymentView(payment, refunds);
  }
}

@Controller('refunds')
export class RefundsController {
  constructor(private readonly payments: PaymentsService) {}

  @Get(':id')
  async get(@CurrentUser() user: SampleUser, @Param('id') id: string) {
    return refundView(await this.payments.getRefund(user.id, id));
  }
}
