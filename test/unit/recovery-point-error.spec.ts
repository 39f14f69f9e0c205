import { describe, expect, it } from '@jest/globals';
import { InternalServerErrorException } from '@nestjs/common';
import { RpcException } from '@nestjs/microservices';
import {
  isRecoveryPointFailure,
  RecoveryPointError,
} from '../../lib/recovery/recovery-point.error.js';

describe('isRecoveryPointFailure', () => {
  const failure = new RecoveryPointError('charge', new Error('connection terminated'));

  it('sees the error itself, and through the causes a handler wraps it in', () => {
    expect(isRecoveryPointFailure(failure)).toBe(true);
    const wrapped = new InternalServerErrorException('payment failed', { cause: failure });
    expect(isRecoveryPointFailure(wrapped)).toBe(true);
    expect(isRecoveryPointFailure(new Error('outer', { cause: wrapped }))).toBe(true);
  });

  it("is false for the handler's own errors and for what is not an error", () => {
    expect(isRecoveryPointFailure(new Error('card declined'))).toBe(false);
    expect(isRecoveryPointFailure(new RpcException('declined'))).toBe(false);
    expect(isRecoveryPointFailure(undefined)).toBe(false);
    expect(isRecoveryPointFailure({ cause: failure })).toBe(false);
    const loop = new Error('loop') as Error & { cause?: unknown };
    loop.cause = loop;
    expect(isRecoveryPointFailure(loop)).toBe(false);
  });
});
