import {
  type CanActivate,
  createParamDecorator,
  type ExecutionContext,
  Injectable,
  UnauthorizedException,
} from '@nestjs/common';

/** The authenticated caller. `getUserId: (req) => req.user?.id` scopes idempotency keys by it. */
export interface SampleUser {
  id: string;
}

const TOKEN = /^Bearer ([A-Za-z0-9._~-]{1,64})$/;

/**
 * A toy authentication: `Authorization: Bearer <user>`, the token IS the user id.
 * Registered as a global guard; guards run before interceptors, so `req.user` is set by the
 * time the idempotency interceptor scopes the key, and a 401 never claims a key.
 */
@Injectable()
export class BearerAuthGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context
      .switchToHttp()
      .getRequest<{ headers: Record<string, string | undefined>; user?: SampleUser }>();
    const match = TOKEN.exec(req.headers.authorization ?? '');
    if (!match) {
      throw new UnauthorizedException({
        type: 'authentication_error',
        code: 'missing_bearer_token',
        message: 'Send Authorization: Bearer <user id> (in this sample the token is the user id)',
      });
    }
    req.user = { id: match[1] };
    return true;
  }
}

export const CurrentUser = createParamDecorator(
  (_: unknown, ctx: ExecutionContext): SampleUser => ctx.switchToHttp().getRequest().user,
);
