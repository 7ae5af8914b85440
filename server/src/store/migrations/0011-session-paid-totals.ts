import { type Kysely, sql } from 'kysely';

/**
 * What each session's delegation has paid, kept as running totals so a request's cap check reads
 * one row: `settlements.session_id` names the session whose delegation pays a settlement (null for
 * x402 and for settlements opened before this), and a session's `paid_atomic` (USDC atomic units
 * confirmed through it), `period_paid_atomic` and `paid_period` (the index of the period of its
 * per-period cap that `period_paid_atomic` counts) grow as its settlements are confirmed.
 *
 * A session stored before this starts from what its payer's confirmed session-rail settlements
 * opened since it was stored paid (what admission counted until now); its period total starts
 * empty, and a settlement in flight across the upgrade (no `session_id`) is not counted.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('settlements').addColumn('session_id', 'text').execute();
  await db.schema
    .alterTable('sessions')
    .addColumn('paid_atomic', 'bigint', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema
    .alterTable('sessions')
    .addColumn('period_paid_atomic', 'bigint', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema.alterTable('sessions').addColumn('paid_period', 'bigint').execute();
  await sql`
    update sessions set paid_atomic = coalesce((
      select sum(s.amount_atomic) from settlements s
      where s.payer = sessions.wallet and s.rail = 'session' and s.status = 'confirmed'
        and s.created_at >= sessions.created_at
    ), 0)
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('sessions').dropColumn('paid_period').execute();
  await db.schema.alterTable('sessions').dropColumn('period_paid_atomic').execute();
  await db.schema.alterTable('sessions').dropColumn('paid_atomic').execute();
  await db.schema.alterTable('settlements').dropColumn('session_id').execute();
}
