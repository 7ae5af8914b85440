import type { Kysely } from 'kysely';

/**
 * The signed transaction of a session-rail settlement, stored before it is broadcast: start-up
 * reconciliation can then rebroadcast exactly that transaction (same nonce, same hash) and never
 * pays a settlement twice.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('settlements').addColumn('tx_raw', 'text').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('settlements').dropColumn('tx_raw').execute();
}
