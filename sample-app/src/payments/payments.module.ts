import { type DynamicModule, Module } from '@nestjs/common';
import { SAMPLE_OPTIONS, type SampleAppOptions } from '../sample.options.js';
import { CardProcessor } from './card-processor.service.js';
import { PaymentsController, RefundsController } from './payments.controller.js';
import { PaymentsService } from './payments.service.js';

@Module({})
export class PaymentsModule {
  static register(options: SampleAppOptions): DynamicModule {
    return {
      module: PaymentsModule,
      controllers: [PaymentsController, RefundsController],
      providers: [{ provide: SAMPLE_OPTIONS, useValue: options }, PaymentsService, CardProcessor],
    };
  }
}
