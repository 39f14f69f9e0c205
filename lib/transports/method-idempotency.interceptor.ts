import { Injectable } from '@nestjs/common';
import { IdempotencyInterceptor } from './idempotency.interceptor.js';

/**
 * What a class-level `@Idempotent()` puts on each HTTP route of its controller, innermost (the
 * class's own attachment steps aside for it there). A class, not an instance: Nest resolves it in
 * the controller's own module, in each app, per request for a request-scoped controller. An
 * instance written into a route method's metadata, which every app, module and subclass using
 * that method shares, served whichever app or module had written it last: the next app answered
 * 503 with a closed app's store, or a module with its own `forRoot()` ran a retry twice.
 */
@Injectable()
export class MethodIdempotencyInterceptor extends IdempotencyInterceptor {}
