import type { Kysely } from 'kysely';

/**
 * What reconciling an x402 settlement needs: the authorization of a settlement, and the block the
 * chain was at when the proof went to the facilitator, from where its AuthorizationUsed event is sought.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('x402_authorizations').addColumn('from_block', 'bigint').execute();
  await db.schema
    .createIndex('x402_authorizations_settlement')
    .on('x402_authorizations')
    .column('settlement_id')
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('x402_authorizations_settlement').execute();
  await db.schema.alterTable('x402_authorizations').dropColumn('from_block').execute();
}
