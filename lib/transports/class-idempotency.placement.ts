import type { CallHandler, ExecutionContext, NestInterceptor } from '@nestjs/common';
import type { Observable } from 'rxjs';
import type { Module } from '@nestjs/core/injector/module.js';
import { ClassIdempotencyInterceptor } from './class-idempotency.interceptor.js';
import { placedOnMethods } from './idempotency.interceptor.js';

/**
 * What `IdempotencyInterceptorOrder` puts on a route method for its controller's class-level
 * `@Idempotent()`: at each call, the `ClassIdempotencyInterceptor` Nest built for the
 * controller's own module in this app, handling the call from the method's innermost place.
 * Interceptor metadata lives on the class and outlives the app: an interceptor instance put
 * there served the next app (a test's next `createTestingModule`) with the closed app's store
 * (503s), and a controller of a module with its own `forRoot()` with another module's options (a
 * retry under its header ran again). Nest registers the class attachment of every controller
 * with its own module when it scans it, so that one is the controller's, in every app.
 */
export function classPlacement(moduleRef: Module): NestInterceptor {
  let target: ClassIdempotencyInterceptor | undefined;
  const placement: NestInterceptor = {
    intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
      target ??= moduleRef.injectables.get(ClassIdempotencyInterceptor)?.instance as
        ClassIdempotencyInterceptor | undefined;
      if (!(target instanceof ClassIdempotencyInterceptor)) {
        // Never run the handler unprotected: a route Nest did not give its attachment fails.
        throw new Error(
          `nestjs-pg-idempotency: the class-level @Idempotent() of ${context.getClass().name} has no interceptor in its module ${moduleRef.name}`,
        );
      }
      return target.interceptOnMethod(context, next);
    },
  };
  placedOnMethods.add(placement);
  return placement;
}
