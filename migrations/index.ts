import { CreateIdempotencyKeys1764680000000 } from './1764680000000-CreateIdempotencyKeys.js';
import { CreateIdempotencyAudit1764680100000 } from './1764680100000-CreateIdempotencyAudit.js';
import { ProtectStoredResponses1764680200000 } from './1764680200000-ProtectStoredResponses.js';
import { TallyReplayAudit1764680300000 } from './1764680300000-TallyReplayAudit.js';
import { KeepFinanceHistory1764680400000 } from './1764680400000-KeepFinanceHistory.js';
import { AddRecoveryPoints1764680500000 } from './1764680500000-AddRecoveryPoints.js';
import {
  IDEMPOTENCY_AUDIT_UP,
  idempotencyAuditDown,
  idempotencyAuditUp,
} from './idempotency-audit.sql.js';
import {
  IDEMPOTENCY_KEYS_UP,
  idempotencyKeysDown,
  idempotencyKeysUp,
  renderSqlFile,
} from './idempotency-keys.sql.js';
import {
  RESPONSE_PROTECTION_UP,
  responseProtectionDown,
  responseProtectionUp,
} from './idempotency-response-protection.sql.js';
import { REPLAY_TALLY_UP, replayTallyDown, replayTallyUp } from './idempotency-replay-tally.sql.js';
import {
  FINANCE_HISTORY_UP,
  financeHistoryDown,
  financeHistoryUp,
} from './idempotency-finance-history.sql.js';
import {
  RECOVERY_POINTS_UP,
  recoveryPointsDown,
  recoveryPointsUp,
} from './idempotency-recovery-points.sql.js';

export {
  CreateIdempotencyKeys1764680000000,
  CreateIdempotencyAudit1764680100000,
  ProtectStoredResponses1764680200000,
  TallyReplayAudit1764680300000,
  KeepFinanceHistory1764680400000,
  AddRecoveryPoints1764680500000,
};
export {
  IDEMPOTENCY_KEYS_UP,
  IDEMPOTENCY_KEYS_DOWN,
  idempotencyKeysUp,
  idempotencyKeysDown,
} from './idempotency-keys.sql.js';
export {
  IDEMPOTENCY_AUDIT_UP,
  IDEMPOTENCY_AUDIT_DOWN,
  idempotencyAuditUp,
  idempotencyAuditDown,
} from './idempotency-audit.sql.js';
export {
  RESPONSE_PROTECTION_UP,
  RESPONSE_PROTECTION_DOWN,
  responseProtectionUp,
  responseProtectionDown,
} from './idempotency-response-protection.sql.js';
export {
  REPLAY_TALLY_UP,
  REPLAY_TALLY_DOWN,
  replayTallyUp,
  replayTallyDown,
} from './idempotency-replay-tally.sql.js';
export {
  FINANCE_HISTORY_UP,
  FINANCE_HISTORY_DOWN,
  financeHistoryUp,
  financeHistoryDown,
} from './idempotency-finance-history.sql.js';
export {
  RECOVERY_POINTS_UP,
  RECOVERY_POINTS_DOWN,
  recoveryPointsUp,
  recoveryPointsDown,
} from './idempotency-recovery-points.sql.js';
export {
  idempotencyPartitionedUp,
  idempotencyArchivePartitions,
  type PartitionedLayoutOptions,
} from './idempotency-partitioned.sql.js';

/** Every migration of the library, in order: `migrations: [...idempotencyMigrations, ...yours]`. */
export const idempotencyMigrations = [
  CreateIdempotencyKeys1764680000000,
  CreateIdempotencyAudit1764680100000,
  ProtectStoredResponses1764680200000,
  TallyReplayAudit1764680300000,
  KeepFinanceHistory1764680400000,
  AddRecoveryPoints1764680500000,
];

/** Every statement, for a table of another name (the module's `tableName` option). */
export function idempotencySchema(tableName = 'idempotency_keys'): string[] {
  return [
    ...idempotencyKeysUp(tableName),
    ...idempotencyAuditUp(tableName),
    ...responseProtectionUp(tableName),
    ...replayTallyUp(tableName),
    ...financeHistoryUp(tableName),
    ...recoveryPointsUp(tableName),
  ];
}

/** Undoes `idempotencySchema(tableName)`, in reverse order: for the `down()` of your migration. */
export function idempotencySchemaDown(tableName = 'idempotency_keys'): string[] {
  return [
    ...recoveryPointsDown(tableName),
    ...financeHistoryDown(tableName),
    ...replayTallyDown(tableName),
    ...responseProtectionDown(tableName),
    ...idempotencyAuditDown(tableName),
    ...idempotencyKeysDown(tableName),
  ];
}

/** The plain `.sql` files shipped in `migrations/`, by file name. */
export function idempotencySqlFiles(): Record<string, string> {
  return {
    '001_idempotency_keys.sql': renderSqlFile('idempotency_keys', IDEMPOTENCY_KEYS_UP),
    '002_idempotency_audit.sql': renderSqlFile(
      'audit trail and reconciliation views',
      IDEMPOTENCY_AUDIT_UP,
    ),
    '003_response_protection.sql': renderSqlFile(
      'encrypted and digest-only responses (records and archive)',
      RESPONSE_PROTECTION_UP,
    ),
    '004_replay_tally.sql': renderSqlFile(
      'replay audit rows per record per flush, with a count',
      REPLAY_TALLY_UP,
    ),
    '005_finance_history.sql': renderSqlFile(
      'daily roll-up of deleted rows and refusals per record, for stable daily figures',
      FINANCE_HISTORY_UP,
    ),
    '006_recovery_points.sql': renderSqlFile(
      'recovery points of ctx.step() and the runs a record took',
      RECOVERY_POINTS_UP,
    ),
  };
}
export {
  migrate,
  IDEMPOTENCY_SQL_MIGRATIONS,
  type MigrateOptions,
  type MigrationPool,
} from './migrate.js';
