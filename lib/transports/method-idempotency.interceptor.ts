import { type CanActivate, Injectable } from '@nestjs/common';
import { IdempotencyInterceptor } from './idempotency.interceptor.js';

/**
 * What a class-level `@Idempotent()` runs on each HTTP route of its controller, innermost: at
 * start-up `IdempotencyInterceptorOrder` puts this class on the route (the class's own attachment
 * steps aside for it there). A class, not an instance, so Nest resolves it in the controller's
 * own module, in each app, per request for a request-scoped controller: an instance written into
 * a route method's metadata, which every app, module and subclass using that method shares,
 * served whichever app or module had written it last (a closed app's store, another module's
 * options).
 *
 * Nest resolves an enhancer class only if it found it on the controller when it scanned it, and
 * a route a subclass declares, or inherits from an undecorated base, has nothing of the class's
 * decorator on it then. So the decorator also lists this class among the controller's guards,
 * where Nest registers it with the controller's module in every app: as a guard it lets every
 * call through.
 */
@Injectable()
export class MethodIdempotencyInterceptor extends IdempotencyInterceptor implements CanActivate {
  canActivate(): boolean {
    return true;
  }
}
