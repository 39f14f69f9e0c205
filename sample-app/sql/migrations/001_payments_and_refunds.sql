-- The sample's own ledger: `payments` and `refunds`, applied after the library's tables. The plain
-- pg flavour runs this file at start-up after `migrate(pool)`; the TypeORM flavour's migration
-- runs it too. Every statement is safe to run again; the lock keeps two starting instances apart.
SELECT pg_advisory_xact_lock(hashtext('sample-app schema'));

CREATE TABLE IF NOT EXISTS payments (
  id              text        PRIMARY KEY,
  user_id         text        NOT NULL,
  amount          integer     NOT NULL CONSTRAINT payments_amount_positive CHECK (amount > 0),
  currency        char(3)     NOT NULL,
  source          text        NOT NULL,
  status          text        NOT NULL
                  CONSTRAINT payments_status_check
                  CHECK (status IN ('succeeded', 'declined', 'partially_refunded', 'refunded')),
  amount_refunded integer     NOT NULL DEFAULT 0,
  failure_code    text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT payments_refund_bounds CHECK (amount_refunded BETWEEN 0 AND amount)
);
CREATE INDEX IF NOT EXISTS idx_payments_user_created ON payments (user_id, created_at DESC);

CREATE TABLE IF NOT EXISTS refunds (
  id         text        PRIMARY KEY,
  payment_id text        NOT NULL REFERENCES payments (id),
  user_id    text        NOT NULL,
  amount     integer     NOT NULL CONSTRAINT refunds_amount_positive CHECK (amount > 0),
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS idx_refunds_payment ON refunds (payment_id);
