import { Column, CreateDateColumn, Entity, PrimaryColumn } from 'typeorm';
import type { Payment, PaymentStatus } from '../payments/ledger.js';

/** A row of the ledger. The table comes from the sample's migration, never from `synchronize`. */
@Entity('payments')
export class PaymentEntity implements Payment {
  /** `pay_<random>` */
  @PrimaryColumn('text')
  id!: string;

  @Column('text', { name: 'user_id' })
  userId!: string;

  /** Minor units (cents). */
  @Column('integer')
  amount!: number;

  @Column('char', { length: 3 })
  currency!: string;

  @Column('text')
  source!: string;

  @Column('text')
  status!: PaymentStatus;

  @Column('integer', { name: 'amount_refunded', default: 0 })
  amountRefunded!: number;

  @Column('text', { name: 'failure_code', nullable: true })
  failureCode!: string | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;
}
