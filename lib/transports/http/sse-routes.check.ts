import { SSE_METADATA } from '@nestjs/common/constants.js';
import { Injectable, type OnModuleInit } from '@nestjs/common';
import { ModulesContainer } from '@nestjs/core';
import { idempotentRoutes } from '../../idempotent-routes.scan.js';

/**
 * Fails start-up when an `@Sse()` route is `@Idempotent()`: the event stream's `200` and headers
 * are sent before the handler's observable is even subscribed, so a refusal (409 in progress with
 * Retry-After, a mismatch, 503) could only arrive as an `event: error` inside a successful stream,
 * and a stream is never stored for replay anyway.
 */
@Injectable()
export class SseRoutesCheck implements OnModuleInit {
  constructor(private readonly modules: ModulesContainer) {}

  onModuleInit(): void {
    for (const route of idempotentRoutes(this.modules)) {
      if (!Reflect.getMetadata(SSE_METADATA, route.handler)) continue;
      throw new Error(
        `nestjs-pg-idempotency: ${route.name} (${route.route}) is an @Sse() route under @Idempotent(): an event stream's 200 is sent before a refusal (409, 503) could be, and a stream is never replayed; remove @Idempotent() from it (or move it out of the @Idempotent() controller)`,
      );
    }
  }
}
