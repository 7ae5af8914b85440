import type { Kysely } from 'kysely';

/**
 * A payer's sessions by expiry: the collector asks, for every payer owing something, whether one of
 * its sessions still lasts past a time. Sessions are never deleted, so by wallet alone that reads
 * every session the payer ever authorized; by wallet and expiry, only those not expired.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex('sessions_wallet_expiry')
    .on('sessions')
    .columns(['wallet', 'expires_at'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('sessions_wallet_expiry').execute();
}
