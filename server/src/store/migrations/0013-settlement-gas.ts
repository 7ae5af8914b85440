import { type Kysely, sql } from 'kysely';

/**
 * What each settlement cost the operator in gas, kept from its receipt when it is confirmed:
 * `gas_used`, and its fee (gas used x effective gas price, plus the L1 data fee) as whole gwei
 * `fee_gwei` and the wei below a gwei `fee_remainder_wei`: a fee in wei passes int8 at 9.2 ETH (a
 * spike of gas prices), in gwei never. A settlement sent by a remote facilitator has a fee of 0 and
 * no gas; one paid by credit alone, or confirmed before this, has neither. The operator's view sums them by day of confirmation, and lists failed ones.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('settlements').addColumn('gas_used', 'bigint').execute();
  await db.schema.alterTable('settlements').addColumn('fee_gwei', 'bigint').execute();
  await db.schema.alterTable('settlements').addColumn('fee_remainder_wei', 'bigint').execute();
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
  await db.schema.alterTable('settlements').dropColumn('fee_remainder_wei').execute();
  await db.schema.alterTable('settlements').dropColumn('fee_gwei').execute();
  await db.schema.alterTable('settlements').dropColumn('gas_used').execute();
}
