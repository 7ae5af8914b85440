import type { Kysely } from 'kysely';

/**
 * State of the x402 extensions, shared by every instance and kept across restarts, each row
 * dropped once past `expires_at`: the payment identifiers payers chose (`payment-identifier`),
 * keyed by payer and id, with the request each one paid and whether it completed; and the
 * sign-in-with-x nonces already used, so a signed sign-in is read once.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('x402_payment_ids')
    .addColumn('payer', 'text', (c) => c.notNull())
    .addColumn('payment_id', 'text', (c) => c.notNull())
    .addColumn('request_hash', 'text', (c) => c.notNull())
    .addColumn('request_id', 'text', (c) => c.notNull())
    .addColumn('cost_pico', 'bigint')
    .addColumn('lease_until', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('x402_payment_ids_payer_id', ['payer', 'payment_id'])
    .execute();
  await db.schema
    .createIndex('x402_payment_ids_expiry')
    .on('x402_payment_ids')
    .column('expires_at')
    .execute();
  await db.schema
    .createTable('siwx_nonces')
    .addColumn('nonce', 'text', (c) => c.notNull().primaryKey())
    .addColumn('address', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('siwx_nonces_expiry').on('siwx_nonces').column('expires_at').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('siwx_nonces').execute();
  await db.schema.dropTable('x402_payment_ids').execute();
}
