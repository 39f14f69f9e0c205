import { type CallHandler, type ExecutionContext, Injectable } from '@nestjs/common';
import { GUARDS_METADATA, INTERCEPTORS_METADATA } from '@nestjs/common/constants.js';
import type { Observable } from 'rxjs';
import { IdempotencyInterceptor, isIdempotencyInterceptor } from './idempotency.interceptor.js';
import { MethodIdempotencyInterceptor } from './method-idempotency.interceptor.js';

/**
 * What `@Idempotent()` on a class attaches. Nest runs a class's interceptors before its method's,
 * so where the route runs the idempotency interceptor too (its own `@Idempotent()`, or the
 * class's `MethodIdempotencyInterceptor` put there at start-up), this one passes every call on
 * and the route's handles it: once per call, whatever an app interceptor between the two does (a
 * `retry()` subscribing again, a hedge subscribing twice). Knowing which attachment it is keeps
 * per-call state out of it.
 */
@Injectable()
export class ClassIdempotencyInterceptor extends IdempotencyInterceptor {
  private readonly onRoute = new WeakMap<object, Map<object, boolean>>();

  override intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const handler = context.getHandler();
    const cls = context.getClass();
    let byClass = this.onRoute.get(handler);
    if (!byClass) this.onRoute.set(handler, (byClass = new Map()));
    let routes = byClass.get(cls);
    if (routes === undefined) byClass.set(cls, (routes = routeRunsIdempotency(cls, handler)));
    return routes ? next.handle() : super.intercept(context, next);
  }
}

/**
 * Whether Nest runs an idempotency interceptor on this route of `cls`. A route function is shared
 * by every class that inherits it, so the class's `MethodIdempotencyInterceptor` on it counts only
 * where Nest registered that class for `cls` (among its guards, see the decorator): elsewhere Nest
 * drops it, and stepping aside would leave the route unprotected.
 */
function routeRunsIdempotency(cls: object, handler: object): boolean {
  const onMethod: unknown[] = Reflect.getMetadata(INTERCEPTORS_METADATA, handler) ?? [];
  if (onMethod.some((i) => i !== MethodIdempotencyInterceptor && isIdempotencyInterceptor(i))) {
    return true;
  }
  const guards: unknown[] = Reflect.getMetadata(GUARDS_METADATA, cls) ?? [];
  return (
    onMethod.includes(MethodIdempotencyInterceptor) && guards.includes(MethodIdempotencyInterceptor)
  );
}
