import { describe, expect, it } from '@jest/globals';
import { Body, Controller, Inject, Injectable, Post } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Idempotent } from '../../lib/index.js';

/**
 * attack-85 on 69ced76. One generic CRUD base controller, two concrete controllers: payments is
 * `@Idempotent()`, products is not and knows nothing about idempotency. Products is unit-tested
 * the way the NestJS docs show, with its service mocked and no database or IdempotencyModule.
 * On 69ced76, loading the payments controller (same spec, a barrel, or the app module imported
 * elsewhere in the run) wrote `MethodIdempotencyInterceptor` onto the base's shared route
 * function, so the products testing module had to build an idempotency interceptor it could not
 * resolve, and failed to compile. Fixed: the decorator writes nothing on route functions. At 7c14544 the class-level decorator left the base's functions alone.
 */
@Injectable()
class CrudService {
  create(dto: object) {
    return { created: dto };
  }
}

abstract class CrudController {
  constructor(@Inject(CrudService) protected readonly service: CrudService) {}
  @Post()
  create(@Body() dto: object) {
    return this.service.create(dto);
  }
}

@Controller('payments')
@Idempotent({ required: true })
export class PaymentsController extends CrudController {}

@Controller('products')
export class ProductsController extends CrudController {}

describe('ProductsController (unit), service mocked', () => {
  it('compiles without an IdempotencyModule, as it did before PaymentsController was written', async () => {
    const moduleRef = await Test.createTestingModule({
      controllers: [ProductsController],
      providers: [{ provide: CrudService, useValue: { create: () => ({ created: 'mock' }) } }],
    }).compile();
    const controller = moduleRef.get(ProductsController);
    expect(controller.create({})).toEqual({ created: 'mock' });
    await moduleRef.close();
  });
});
