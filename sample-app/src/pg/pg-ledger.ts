import type { Ledger, Payment, PaymentStatus, Refund } from '../payments/ledger.js';

/** What PgLedger queries through: the app's `pg.Pool`, or the store's `TransactionClient`. */
export interface Sql {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
}

const PAYMENT = `id, user_id AS "userId", amount, currency, source, status,
  amount_refunded AS "amountRefunded", failure_code AS "failureCode", created_at AS "createdAt"`;
const REFUND = `id, payment_id AS "paymentId", user_id AS "userId", amount, created_at AS "createdAt"`;

/** The ledger in plain SQL with pg's `query(text, values)`. */
export class PgLedger implements Ledger {
  constructor(private readonly sql: Sql) {}

  private async rows<T>(text: string, values: unknown[]): Promise<T[]> {
    return (await this.sql.query(text, values)).rows as T[];
  }

  async insertPayment(p: Omit<Payment, 'createdAt'>): Promise<Payment> {
    const [row] = await this.rows<Payment>(
      `INSERT INTO payments (id, user_id, amount, currency, source, status, amount_refunded, failure_code)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING ${PAYMENT}`,
      [p.id, p.userId, p.amount, p.currency, p.source, p.status, p.amountRefunded, p.failureCode],
    );
    return row;
  }

  async lockPayment(id: string, userId: string): Promise<Payment | null> {
    const [row] = await this.rows<Payment>(
      `SELECT ${PAYMENT} FROM payments WHERE id = $1 AND user_id = $2 FOR UPDATE`,
      [id, userId],
    );
    return row ?? null;
  }

  async setRefunded(id: string, amountRefunded: number, status: PaymentStatus): Promise<void> {
    await this.sql.query('UPDATE payments SET amount_refunded = $2, status = $3 WHERE id = $1', [
      id,
      amountRefunded,
      status,
    ]);
  }

  async insertRefund(r: Omit<Refund, 'createdAt'>): Promise<Refund> {
    const [row] = await this.rows<Refund>(
      `INSERT INTO refunds (id, payment_id, user_id, amount) VALUES ($1, $2, $3, $4) RETURNING ${REFUND}`,
      [r.id, r.paymentId, r.userId, r.amount],
    );
    return row;
  }

  listPayments(userId: string, limit: number): Promise<Payment[]> {
    return this.rows(
      `SELECT ${PAYMENT} FROM payments WHERE user_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2`,
      [userId, limit],
    );
  }

  async findPayment(id: string, userId: string): Promise<Payment | null> {
    const [row] = await this.rows<Payment>(
      `SELECT ${PAYMENT} FROM payments WHERE id = $1 AND user_id = $2`,
      [id, userId],
    );
    return row ?? null;
  }

  refundsOf(paymentId: string): Promise<Refund[]> {
    return this.rows(
      `SELECT ${REFUND} FROM refunds WHERE payment_id = $1 ORDER BY created_at ASC, id ASC`,
      [paymentId],
    );
  }

  async findRefund(id: string, userId: string): Promise<Refund | null> {
    const [row] = await this.rows<Refund>(
      `SELECT ${REFUND} FROM refunds WHERE id = $1 AND user_id = $2`,
      [id, userId],
    );
    return row ?? null;
  }
}
