const names = new WeakMap<object, string>();

/**
 * The property name a handler is declared under on its class, which Nest keys its parameter
 * metadata by (`@Res()`): a decorator that wraps a method (`descriptor.value = function (...) {}`,
 * a tracing span, MikroORM's `@CreateRequestContext()`) leaves a function named `''` or after
 * itself. Looked up once per handler; the function's own name when no property holds it.
 */
export function handlerProperty(cls: { prototype?: unknown }, handler: object): string {
  let name = names.get(handler);
  if (name === undefined) {
    name = propertyName(cls.prototype as object, handler) ?? (handler as { name: string }).name;
    names.set(handler, name);
  }
  return name;
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
