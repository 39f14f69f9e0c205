import type { ExecutionContext } from '@nestjs/common';

const names = new WeakMap<object, string>();

/**
 * `Class.method` of the handler a call reached, by the method's property name: a decorator that
 * wraps a method (`descriptor.value = function (...) {}`) leaves a function named `''` or after
 * itself, and two such handlers of one class would read alike. Looked up once per handler.
 */
export function handlerName(context: ExecutionContext): string {
  const cls = context.getClass();
  const handler = context.getHandler();
  let name = names.get(handler);
  if (name === undefined) {
    name = propertyName(cls.prototype as object, handler) ?? handler.name;
    names.set(handler, name);
  }
  return `${cls.name}.${name}`;
}

function propertyName(prototype: object, handler: object): string | undefined {
  for (let proto = prototype; proto && proto !== Object.prototype;) {
    for (const key of Object.getOwnPropertyNames(proto)) {
      if (Object.getOwnPropertyDescriptor(proto, key)?.value === handler) return key;
    }
    proto = Object.getPrototypeOf(proto) as object;
  }
  return undefined;
}
