import { type CallHandler, type ExecutionContext, Injectable } from '@nestjs/common';
import type { Observable } from 'rxjs';
import { attachesIdempotency, IdempotencyInterceptor } from './idempotency.interceptor.js';

/**
 * What `@Idempotent()` on a class attaches. Nest runs a class's interceptors before its method's,
 * so where the method carries the idempotency interceptor too (its own `@Idempotent()`), this one
 * passes every call on and the method's handles it: once per call, whatever an app interceptor
 * between the two does (a `retry()` subscribing again, a hedge subscribing twice). Knowing which
 * attachment it is keeps per-call state out of it.
 */
@Injectable()
export class ClassIdempotencyInterceptor extends IdempotencyInterceptor {
  private readonly onMethod = new WeakMap<object, boolean>();

  override intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const handler = context.getHandler();
    let own = this.onMethod.get(handler);
    if (own === undefined) this.onMethod.set(handler, (own = attachesIdempotency(handler)));
    return own ? next.handle() : super.intercept(context, next);
  }
}
