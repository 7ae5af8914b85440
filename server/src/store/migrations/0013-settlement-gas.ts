import { type Kysely, sql } from 'kysely';

/**
 * What each settlement cost the operator in gas, kept from its receipt when it is confirmed:
 * `gas_used` and `fee_wei` (gas used x effective gas price, plus the L1 data fee). A settlement sent
 * by a remote facilitator has a fee of 0 and no gas; one paid by credit alone, or confirmed before
 * this, has neither. The operator's view sums them by day of confirmation, and lists failed ones.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('settlements').addColumn('gas_used', 'bigint').execute();
  await db.schema.alterTable('settlements').addColumn('fee_wei', 'bigint').execute();
  await db.schema
    .createIndex('settlements_confirmed_at')
    .on('settlements')
    .column('confirmed_at')
    .where(sql.ref('status'), '=', sql`'confirmed'`)
    .execute();
  await db.schema
    .createIndex('settlements_failed')
    .on('settlements')
    .columns(['created_at', 'id'])
    .where(sql.ref('status'), '=', sql`'failed'`)
    .execute();
  // Commission by day over every payer: the ledger's other indexes lead with the payer.
  await db.schema.createIndex('usage_records_created').on('usage_records').column('created_at').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('usage_records_created').execute();
  await db.schema.dropIndex('settlements_failed').execute();
  await db.schema.dropIndex('settlements_confirmed_at').execute();
  await db.schema.alterTable('settlements').dropColumn('fee_wei').execute();
  await db.schema.alterTable('settlements').dropColumn('gas_used').execute();
}
