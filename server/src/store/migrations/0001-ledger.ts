import { type Kysely, sql } from 'kysely';

/** The ledger: payers, sessions, usage records, settlements and the x402 replay guard. */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('payers')
    .addColumn('wallet', 'text', (c) => c.primaryKey())
    .addColumn('credit_pico', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('sessions')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('wallet', 'text', (c) => c.notNull().references('payers.wallet'))
    .addColumn('delegation', 'text', (c) => c.notNull())
    .addColumn('delegation_hash', 'text', (c) => c.notNull().unique())
    .addColumn('signature', 'text', (c) => c.notNull())
    .addColumn('limits', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addColumn('revoked_at', 'bigint')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('sessions_wallet').on('sessions').columns(['wallet', 'created_at']).execute();

  await db.schema
    .createTable('settlements')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('payer', 'text', (c) => c.notNull().references('payers.wallet'))
    .addColumn('rail', 'text', (c) => c.notNull().check(sql`rail in ('session', 'x402')`))
    .addColumn('status', 'text', (c) =>
      c.notNull().check(sql`status in ('pending', 'sent', 'confirmed', 'failed')`),
    )
    .addColumn('amount_atomic', 'bigint', (c) => c.notNull().check(sql`amount_atomic >= 0`))
    .addColumn('records_total_pico', 'bigint', (c) => c.notNull())
    .addColumn('record_count', 'bigint', (c) => c.notNull())
    .addColumn('credit_before_pico', 'bigint', (c) => c.notNull())
    .addColumn('carried_pico', 'bigint', (c) => c.notNull().check(sql`carried_pico >= 0`))
    .addColumn('tx_hash', 'text')
    .addColumn('block_number', 'bigint')
    .addColumn('failure_reason', 'text')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .addColumn('sent_at', 'bigint')
    .addColumn('confirmed_at', 'bigint')
    .addColumn('failed_at', 'bigint')
    .execute();
  await db.schema
    .createIndex('settlements_payer_created')
    .on('settlements')
    .columns(['payer', 'created_at'])
    .execute();
  // The credit a settlement carries is only right if no other one of the payer is in flight.
  await db.schema
    .createIndex('settlements_one_unfinished_per_payer')
    .on('settlements')
    .column('payer')
    .unique()
    .where(sql.ref('status'), 'in', sql`('pending', 'sent')`)
    .execute();
  await db.schema
    .createIndex('settlements_unfinished')
    .on('settlements')
    .columns(['status', 'created_at'])
    .where(sql.ref('status'), 'in', sql`('pending', 'sent')`)
    .execute();

  await db.schema
    .createTable('usage_records')
    .addColumn('request_id', 'text', (c) => c.primaryKey())
    .addColumn('payer', 'text', (c) => c.notNull().references('payers.wallet'))
    .addColumn('rail', 'text', (c) => c.notNull().check(sql`rail in ('session', 'x402')`))
    .addColumn('model', 'text', (c) => c.notNull())
    .addColumn('input_tokens', 'bigint', (c) => c.notNull())
    .addColumn('cache_read_tokens', 'bigint', (c) => c.notNull())
    .addColumn('cache_write_tokens', 'bigint', (c) => c.notNull())
    .addColumn('output_tokens', 'bigint', (c) => c.notNull())
    .addColumn('reasoning_tokens', 'bigint', (c) => c.notNull())
    .addColumn('provider_cost_pico', 'bigint', (c) => c.notNull())
    .addColumn('commission_pico', 'bigint', (c) => c.notNull())
    .addColumn('total_pico', 'bigint', (c) =>
      c.notNull().check(sql`total_pico = provider_cost_pico + commission_pico`),
    )
    .addColumn('exact', 'bigint', (c) => c.notNull().check(sql`exact in (0, 1)`))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('settlement_id', 'text', (c) => c.references('settlements.id'))
    .execute();
  await db.schema
    .createIndex('usage_records_payer_created')
    .on('usage_records')
    .columns(['payer', 'created_at', 'request_id'])
    .execute();
  await db.schema
    .createIndex('usage_records_unclaimed')
    .on('usage_records')
    .columns(['payer', 'created_at'])
    .where(sql.ref('settlement_id'), 'is', null)
    .execute();
  await db.schema
    .createIndex('usage_records_settlement')
    .on('usage_records')
    .column('settlement_id')
    .execute();

  await db.schema
    .createTable('x402_authorizations')
    .addColumn('asset', 'text', (c) => c.notNull())
    .addColumn('payer', 'text', (c) => c.notNull())
    .addColumn('nonce', 'text', (c) => c.notNull())
    .addColumn('value_atomic', 'bigint', (c) => c.notNull())
    .addColumn('valid_before', 'bigint', (c) => c.notNull())
    .addColumn('settlement_id', 'text', (c) => c.references('settlements.id'))
    .addColumn('tx_hash', 'text')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('x402_authorizations_pk', ['asset', 'payer', 'nonce'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of ['x402_authorizations', 'usage_records', 'settlements', 'sessions', 'payers']) {
    await db.schema.dropTable(table).execute();
  }
}
