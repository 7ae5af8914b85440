import type { Kysely } from 'kysely';

/**
 * The nonce after the last one a node took from each relayer sender, per chain, and when: written
 * under the sender's lock, another instance's next send starts there for a few seconds, while its
 * (load-balanced) node may not have seen that transaction yet.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('relayer_nonces')
    .addColumn('chain_id', 'bigint', (c) => c.notNull())
    .addColumn('sender', 'text', (c) => c.notNull())
    .addColumn('next_nonce', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('relayer_nonces_chain_sender', ['chain_id', 'sender'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('relayer_nonces').execute();
}
