import { Injectable, type OnModuleInit } from '@nestjs/common';
import { ModulesContainer } from '@nestjs/core';
import {
  IDEMPOTENT_METADATA,
  MICROSERVICE_PATTERN_METADATA,
} from '../../idempotency-internal.constants.js';
import { controllerRoutes } from '../../idempotent-routes.scan.js';
import { isEventHandler } from '../../execution/idempotent-route.resolver.js';
import type { IdempotentOptions } from '../../interfaces/idempotent-options.interface.js';
import { declaredPatterns } from './rpc-request.js';

/**
 * Fails start-up when two `@Idempotent()` `@EventPattern()` handlers of one pattern would share a
 * scope: an event handler's default scope is `RPC <pattern> <Class>.<method>`, so two classes of
 * the same name (in two feature modules) would be one operation, and the second handler would be
 * answered with the first one's outcome instead of running, its work lost.
 */
@Injectable()
export class EventScopesCheck implements OnModuleInit {
  constructor(private readonly modules: ModulesContainer) {}

  onModuleInit(): void {
    const seen = new Map<string, object>();
    for (const { cls, routes } of controllerRoutes(this.modules, MICROSERVICE_PATTERN_METADATA)) {
      for (const { name, handler } of routes) {
        const options = [cls, handler].map(
          (target) => Reflect.getMetadata(IDEMPOTENT_METADATA, target) as IdempotentOptions | undefined, // prettier-ignore
        );
        if (!isEventHandler(handler) || options.every((o) => o === undefined)) continue;
        if (options.some((o) => o?.endpoint !== undefined)) continue;
        for (const pattern of declaredPatterns(handler)) {
          const scope = `RPC ${pattern} ${cls.name}.${name}`;
          const other = seen.get(scope);
          if (other !== undefined && other !== cls) {
            throw new Error(
              `nestjs-pg-idempotency: two @Idempotent() @EventPattern() handlers named ${cls.name}.${name} handle '${pattern}' and would share the scope '${scope}': the second would be answered with the first one's outcome and never run. Give each its own name with @Idempotent({ endpoint: '...' })`,
            );
          }
          seen.set(scope, cls);
        }
      }
    }
  }
}
