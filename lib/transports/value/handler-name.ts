import type { ExecutionContext } from '@nestjs/common';
import { handlerProperty } from '../../execution/handler-property.js';

/**
 * `Class.method` of the handler a call reached, by the method's property name: two handlers of
 * one class wrapped by a decorator would otherwise read alike (both `''`).
 */
export function handlerName(context: ExecutionContext): string {
  const cls = context.getClass();
  return `${cls.name}.${handlerProperty(cls, context.getHandler())}`;
}
