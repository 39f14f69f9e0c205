import { Column, CreateDateColumn, Entity, PrimaryColumn } from 'typeorm';
import type { Refund } from '../payments/ledger.js';

@Entity('refunds')
export class RefundEntity implements Refund {
  /** `re_<random>` */
  @PrimaryColumn('text')
  id!: string;

  @Column('text', { name: 'payment_id' })
  paymentId!: string;

  @Column('text', { name: 'user_id' })
  userId!: string;

  @Column('integer')
  amount!: number;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;
}
