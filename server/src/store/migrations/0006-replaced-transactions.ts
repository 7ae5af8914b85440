import type { Kysely } from 'kysely';

/**
 * The transactions a settlement's current one replaced (same nonce, lower fees), oldest first and
 * comma-separated: whichever of them is mined is the payment, so reconciliation looks at them all.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('settlements').addColumn('replaced_tx_hashes', 'text').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('settlements').dropColumn('replaced_tx_hashes').execute();
}
