import type { Kysely } from 'kysely';

/**
 * The nonce after the last one a node took from each relayer sender, written under the sender's
 * lock: another instance's next send starts there even when its (load-balanced) node has not seen
 * that transaction yet.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('relayer_nonces')
    .addColumn('sender', 'text', (c) => c.primaryKey())
    .addColumn('next_nonce', 'bigint', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('relayer_nonces').execute();
}
