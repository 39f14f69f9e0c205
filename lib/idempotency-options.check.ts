import { closestName } from './closest-name.js';
import { describeValue } from './describe-value.js';
import type {
  IdempotencyCleanupOptions,
  IdempotencyEncryptionOptions,
  IdempotencyModuleOptions,
} from './interfaces/idempotency-module-options.interface.js';

/** What a value must be, or undefined when it is fine (`undefined` values never reach a rule). */
type ValueRule = (value: unknown) => string | undefined;
/** An object option (`cleanup`): its own keys are checked too. */
interface SectionRule {
  keys: Rules<object>;
  /** `replayCache: false` turns the whole section off. */
  orFalse?: boolean;
}
type Rule = ValueRule | SectionRule;
/** One rule per key of T, no more, no less: a new option that is not listed does not compile. */
export type Rules<T> = { readonly [K in keyof Required<T>]: Rule };

const show = (v: unknown) => (typeof v === 'string' ? JSON.stringify(v) : String(v));
export const oneOf =
  (...allowed: unknown[]): ValueRule =>
  (v) =>
    allowed.includes(v) ? undefined : `one of ${allowed.map(show).join(', ')}`;
const ofType =
  (type: string, what: string): ValueRule =>
  (v) =>
    typeof v === type && v !== null ? undefined : what;
export const fn = ofType('function', 'a function');
const object = ofType('object', 'an object');
export const flag = ofType('boolean', 'true or false');
export const nonEmptyString: ValueRule = (v) =>
  typeof v === 'string' && v !== '' ? undefined : 'a non-empty string';
const strings: ValueRule = (v) =>
  Array.isArray(v) && v.every((s) => typeof s === 'string') ? undefined : 'an array of strings';
const nonNegative: ValueRule = (v) =>
  typeof v === 'number' && Number.isFinite(v) && v >= 0 ? undefined : 'a non-negative number';
/** Checked where it is resolved (numbers, table name, cron, encryption keys): only its key is checked here. */
const checkedOnResolve: ValueRule = () => undefined;

const CLEANUP: Rules<IdempotencyCleanupOptions> = {
  enabled: flag,
  cron: checkedOnResolve,
  batchSize: checkedOnResolve,
  retentionSeconds: checkedOnResolve,
};
const REPLAY_CACHE: Rules<Exclude<IdempotencyModuleOptions['replayCache'], false | undefined>> = {
  maxEntries: nonNegative,
  maxBytes: nonNegative,
  ttlSeconds: nonNegative,
};
const ENCRYPTION: Rules<IdempotencyEncryptionOptions> = {
  keys: object,
  activeKeyId: checkedOnResolve,
};

/** Every option of `forRoot()` (docs/options.md lists each, a test holds it). Add new options here. */
export const OPTION_RULES: Rules<IdempotencyModuleOptions> = {
  dataSource: object,
  store: object,
  pool: object,
  transactions: (v) =>
    (typeof v === 'object' && v !== null) || typeof v === 'function'
      ? undefined
      : 'an adapter (e.g. pgTransactions()) or a function (client) => manager',
  ttlSeconds: checkedOnResolve,
  getUserId: fn,
  headerName: nonEmptyString,
  leaseSeconds: checkedOnResolve,
  maxHoldSeconds: checkedOnResolve,
  retryAfterSeconds: checkedOnResolve,
  replayHeaders: strings,
  maxResponseBytes: checkedOnResolve,
  storeIf: fn,
  fingerprint: fn,
  getRpcKey: fn,
  getRpcUserId: fn,
  onRpcWithoutHandler: fn,
  mismatchStatus: oneOf(409, 422),
  tableName: checkedOnResolve,
  replayAudit: oneOf('batched', 'off'),
  replayAuditFlushMs: checkedOnResolve,
  replayAuditMaxBuffered: checkedOnResolve,
  statementTimeoutMs: checkedOnResolve,
  preparedStatements: flag,
  singleCommitMaxSeconds: checkedOnResolve,
  replayCache: { keys: REPLAY_CACHE, orFalse: true },
  encryption: { keys: ENCRYPTION },
  derivedKeySecret: checkedOnResolve,
  cleanup: { keys: CLEANUP },
};

export const OPTION_KEYS = Object.keys(OPTION_RULES) as (keyof IdempotencyModuleOptions)[];

const fail = (message: string): never => {
  throw new Error(`nestjs-pg-idempotency: ${message}`);
};

function unknownKey(path: string, key: string, valid: string[]): never {
  if (path === '' && key === 'isGlobal') {
    fail(
      "unknown option 'isGlobal': it goes next to useFactory in forRootAsync({ isGlobal, useFactory }), not in the options the factory returns",
    );
  }
  const closest = closestName(key, valid);
  return fail(
    closest
      ? `unknown option '${path}${key}' (did you mean '${path}${closest}'?)`
      : `unknown option '${path}${key}'; valid options: ${valid.map((k) => path + k).join(', ')}`,
  );
}

export function checkSection(path: string, value: object, rules: Rules<object>): void {
  const valid = Object.keys(rules);
  for (const [key, v] of Object.entries(value)) {
    if (!Object.hasOwn(rules, key)) unknownKey(path, key, valid);
    if (v !== undefined) checkValue(`${path}${key}`, v, (rules as Record<string, Rule>)[key]);
  }
}

function checkValue(name: string, value: unknown, rule: Rule): void {
  if (typeof rule === 'function') {
    const must = rule(value);
    if (must) fail(`${name} must be ${must}, got ${describeValue(value)}`);
    return;
  }
  if (rule.orFalse && value === false) return;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    fail(
      `${name} must be ${rule.orFalse ? 'false or ' : ''}an object, got ${describeValue(value)}`,
    );
  }
  checkSection(`${name}.`, value as object, rule.keys);
}

/**
 * Refuses at start-up what would otherwise be ignored silently: an unknown key (`ttlSecond`,
 * named with the valid key it is closest to) or a value the option does not take
 * (`mismatchStatus: 400`, a string where a function goes).
 */
export function checkIdempotencyOptions(options: IdempotencyModuleOptions): void {
  if (typeof options === 'object' && options !== null) checkSection('', options, OPTION_RULES);
}
