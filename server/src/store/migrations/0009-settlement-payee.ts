import type { Kysely } from 'kysely';

/**
 * Whom a settlement pays: the treasury when it was opened. Its transaction is judged against that
 * address, so an operator who changes TREASURY_ADDRESS while settlements are in flight does not
 * have paid ones taken for unpaid (and paid again). Null for settlements opened before this.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('settlements').addColumn('pay_to', 'text').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('settlements').dropColumn('pay_to').execute();
}
