import type { Kysely } from 'kysely';

/**
 * Transactions the relayer sent that no settlement records (a smart account's deployment), by
 * sender and key, stored before their broadcast and kept until their nonce is used: after a
 * restart, or from another instance, a retry waits on or replaces the one sent instead of queueing
 * another behind it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('relayer_sends')
    .addColumn('sender', 'text', (c) => c.notNull())
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('tx_hash', 'text', (c) => c.notNull())
    .addColumn('tx_raw', 'text', (c) => c.notNull())
    .addColumn('nonce', 'bigint', (c) => c.notNull())
    .addColumn('sent_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('relayer_sends_sender_key', ['sender', 'key'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('relayer_sends').execute();
}
