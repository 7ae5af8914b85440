import { type Kysely, type SqlBool, sql } from 'kysely';

/**
 * Records that cost something and are not claimed by a settlement yet, by payer: what a request's
 * "is anything owed?" check reads. Records costing 0 (free models) stay out of it, so a payer using
 * only those never makes the check slower.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex('usage_records_owed')
    .on('usage_records')
    .column('payer')
    .where(sql<SqlBool>`settlement_id is null and total_pico > 0`)
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('usage_records_owed').execute();
}
