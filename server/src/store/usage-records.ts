import type { Insertable, Kysely, Selectable } from 'kysely';
import type { Database, UsageRecordsTable } from './schema.js';

export type NewUsageRow = Insertable<UsageRecordsTable>;
export type UsageRow = Selectable<UsageRecordsTable>;

/**
 * Inserts usage records, and their payers when new, in one transaction (one commit for all).
 * Returns each request id's stored row: the new one, or the one recorded before under that id.
 */
export async function insertUsageRows(
  db: Kysely<Database>,
  rows: readonly NewUsageRow[],
): Promise<Map<string, UsageRow>> {
  const payers = new Map(rows.map((row) => [row.payer, row.created_at]));
  return db.transaction().execute(async (trx) => {
    await trx
      .insertInto('payers')
      .values([...payers].map(([wallet, createdAt]) => ({ wallet, credit_pico: 0, created_at: createdAt })))
      .onConflict((conflict) => conflict.column('wallet').doNothing())
      .execute();
    const inserted = await trx
      .insertInto('usage_records')
      .values([...rows])
      .onConflict((conflict) => conflict.column('request_id').doNothing())
      .returningAll()
      .execute();
    const byRequest = new Map(inserted.map((row) => [row.request_id, row]));
    // Request ids recorded before (a retry): the first record stands.
    const known = rows.filter((row) => !byRequest.has(row.request_id)).map((row) => row.request_id);
    if (known.length > 0)
      for (const row of await trx
        .selectFrom('usage_records')
        .selectAll()
        .where('request_id', 'in', known)
        .execute())
        byRequest.set(row.request_id, row);
    return byRequest;
  });
}
