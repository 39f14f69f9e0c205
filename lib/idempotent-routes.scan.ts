import { METHOD_METADATA, PATH_METADATA } from '@nestjs/common/constants.js';
import { RequestMethod } from '@nestjs/common';
import { MetadataScanner, type ModulesContainer } from '@nestjs/core';
import { IDEMPOTENT_METADATA } from './idempotency-internal.constants.js';
import type { IdempotentOptions } from './interfaces/idempotent-options.interface.js';

/** One controller route under `@Idempotent()` (on its method or its controller), for start-up checks. */
export interface IdempotentRouteRef {
  handler: object;
  /** Method and controller options merged, as the interceptor merges them. */
  options: IdempotentOptions;
  /** `Controller.method`, for error messages. */
  name: string;
  /** `GET /path`, as declared (the first path of several). */
  route: string;
}

const read = (target: object): IdempotentOptions | undefined =>
  Reflect.getMetadata(IDEMPOTENT_METADATA, target);

const firstPath = (target: object): string => {
  const path: unknown = Reflect.getMetadata(PATH_METADATA, target);
  return String((Array.isArray(path) ? path[0] : path) ?? '');
};

function declaredRoute(cls: object, handler: object): string {
  const method = RequestMethod[Reflect.getMetadata(METHOD_METADATA, handler) as number] ?? 'ALL';
  const path = [firstPath(cls), firstPath(handler)]
    .flatMap((part) => part.split('/'))
    .filter(Boolean)
    .join('/');
  return `${method} /${path}`;
}

type Controller = new (...args: never[]) => object;

/** A controller and its route handlers. */
export interface ControllerRoutes {
  cls: Controller;
  routes: { name: string; handler: object }[];
}

/**
 * Every controller of the app with its route handlers (methods with a path), by method name; with
 * `metadata`, its methods that carry that metadata key instead (microservice handlers).
 */
export function controllerRoutes(
  modules: ModulesContainer,
  metadata: string = PATH_METADATA,
): ControllerRoutes[] {
  const scanner = new MetadataScanner();
  const controllers: ControllerRoutes[] = [];
  for (const moduleRef of modules.values()) {
    for (const wrapper of moduleRef.controllers.values()) {
      const cls = wrapper.metatype as Controller | null;
      if (typeof cls !== 'function') continue;
      const proto = cls.prototype as Record<string, object>;
      const routes = scanner
        .getAllMethodNames(proto)
        .map((name) => ({ name, handler: proto[name] }))
        .filter(({ handler }) => Reflect.getMetadata(metadata, handler) !== undefined);
      controllers.push({ cls, routes });
    }
  }
  return controllers;
}

/** Every route of every controller the app has, with `@Idempotent()` in effect. */
export function idempotentRoutes(modules: ModulesContainer): IdempotentRouteRef[] {
  const routes: IdempotentRouteRef[] = [];
  for (const { cls, routes: handlers } of controllerRoutes(modules)) {
    for (const { name, handler } of handlers) {
      const onClass = read(cls);
      const onMethod = read(handler);
      if (!onClass && !onMethod) continue;
      const options = { ...onClass, ...onMethod };
      const route = declaredRoute(cls, handler);
      routes.push({ handler, options, name: `${cls.name}.${name}`, route });
    }
  }
  return routes;
}
