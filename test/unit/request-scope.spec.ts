import { describe, expect, it } from '@jest/globals';
import type { Logger } from '@nestjs/common';
import { IDEMPOTENCY_DEFAULTS } from '../../lib/idempotency.defaults.js';
import { RequestRefusedError } from '../../lib/request/request-refused.error.js';
import { normalizeUserId, RequestScope } from '../../lib/request/request-scope.js';
import { defaultUserId } from '../../lib/index.js';

const { getUserId } = IDEMPOTENCY_DEFAULTS;

function refusal(fn: () => unknown): RequestRefusedError {
  try {
    fn();
  } catch (err) {
    if (err instanceof RequestRefusedError) return err;
    throw err;
  }
  throw new Error('not refused');
}

describe('default getUserId', () => {
  it.each([
    ['a user entity', { id: 'u_1', sub: 'other' }, 'u_1'],
    ['a JWT payload (docs AuthGuard)', { sub: 7, username: 'john' }, 7],
    ['passport-jwt validate() of the docs', { userId: 7, username: 'john' }, 7],
  ])('reads %s', (_, user, id) => {
    expect(getUserId({ user })).toBe(id);
  });

  it('is exported as defaultUserId, for a getUserId that falls back to it', () => {
    expect(getUserId).toBe(defaultUserId);
    expect(defaultUserId({ user: { sub: 'u_9' } })).toBe('u_9');
  });

  it('finds nothing without a user, or in a user without an id', () => {
    expect(getUserId({})).toBeUndefined();
    expect(getUserId({ user: { email: 'a@b.c' } })).toBeUndefined();
  });
});

describe('normalizeUserId', () => {
  it('puts requests without a user in the anonymous scope', () => {
    expect(normalizeUserId(undefined, false)).toBe('');
    expect(normalizeUserId(null, false)).toBe('');
  });

  it.each([
    ['a string', 'alice', 'alice'],
    ['a number', 42, '42'],
    ['a bigint', 2n ** 70n, '1180591620717411303424'],
    ['255 characters of 2 UTF-16 units each', '😀'.repeat(255), '😀'.repeat(255)],
  ])('keeps %s as a string', (_, value, id) => {
    expect(normalizeUserId(value, true)).toBe(id);
  });

  it('refuses a logged-in user without an id: 500, not the anonymous scope', () => {
    const err = refusal(() => normalizeUserId(undefined, true));
    expect(err).toMatchObject({ status: 500, code: 'idempotency_misconfigured' });
    expect(err.message).toMatch(/req.user is set but getUserId found no user id/);
  });

  it('names the getUserId option the app set when that one found nothing', () => {
    const errors: string[] = [];
    const logger = { error: (m: string) => errors.push(m) } as unknown as Logger;
    const custom = new RequestScope((req) => req.user?.id, logger);
    const err = refusal(() => custom.userId({ user: { sub: 7 } }, 'POST /a'));
    expect(err).toMatchObject({ status: 500, code: 'idempotency_misconfigured' });
    expect(err.message).toMatch(/^req.user is set but the getUserId option returned undefined/);
    expect(err.message).not.toContain('set the getUserId option');
    const byDefault = new RequestScope(getUserId, logger);
    expect(refusal(() => byDefault.userId({ user: {} }, 'POST /a')).message).toContain(
      'set the getUserId option',
    );
  });

  it.each([
    ['an object', { id: 1 }],
    ['an array', ['a']],
    ['a boolean', true],
    ['NaN', Number.NaN],
    ['a function', () => 'a'],
  ])('refuses %s instead of stringifying it: 500, without echoing the value', (_, value) => {
    const err = refusal(() => normalizeUserId(value, true));
    expect(err).toMatchObject({ status: 500, code: 'idempotency_misconfigured' });
    expect(err.message).toMatch(/^getUserId returned an? [a-z -]+; it must return/);
  });

  it.each([
    ['256 characters', 'a'.repeat(256), /longer than 255/],
    ['3 000 characters', 'a'.repeat(3000), /longer than 255/],
    ['NUL', 'a\u0000b', /control/],
    ['a newline', 'a\nb', /control/],
    ['DEL', 'a\u007fb', /control/],
    ['a C1 control', 'a\u0085b', /control/],
    ['a lone surrogate', 'a\ud800b', /control/],
  ])('refuses %s as the client error 400 idempotency_user_invalid', (_, value, detail) => {
    const err = refusal(() => normalizeUserId(value, true));
    expect(err).toMatchObject({ status: 400, code: 'idempotency_user_invalid' });
    expect(err.message).toMatch(detail);
  });
});

describe('RequestScope', () => {
  it('logs a configuration error once per route, and refuses every request', () => {
    const errors: string[] = [];
    const logger = { error: (m: string) => errors.push(m) } as unknown as Logger;
    const scope = new RequestScope(getUserId, logger);
    const req = { user: { email: 'a@b.c' } };
    for (let i = 0; i < 3; i++) {
      expect(() => scope.userId(req, 'POST /a')).toThrow(RequestRefusedError);
    }
    expect(() => scope.userId(req, 'POST /b')).toThrow(RequestRefusedError);
    expect(errors).toHaveLength(2);
    expect(errors[0]).toMatch(/^Refusing POST \/a: req.user is set/);
  });

  it('does not log client errors', () => {
    const errors: string[] = [];
    const logger = { error: (m: string) => errors.push(m) } as unknown as Logger;
    const scope = new RequestScope(getUserId, logger);
    expect(() => scope.userId({ user: { id: 'x'.repeat(300) } }, 'POST /a')).toThrow(/longer/);
    expect(errors).toHaveLength(0);
  });
});
