import { type Kysely, type SqlBool, sql } from 'kysely';

/**
 * The records of a settlement, by settlement: only claimed records are in the index now. Every
 * chat request inserts an unclaimed record, which no longer adds an entry (a NULL key) to it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('usage_records_settlement').execute();
  await db.schema
    .createIndex('usage_records_settlement')
    .on('usage_records')
    .column('settlement_id')
    .where(sql<SqlBool>`settlement_id is not null`)
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('usage_records_settlement').execute();
  await db.schema
    .createIndex('usage_records_settlement')
    .on('usage_records')
    .column('settlement_id')
    .execute();
}
