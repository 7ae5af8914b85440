import type { Insertable, Kysely, QueryCreator, Selectable } from 'kysely';
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
  return db.transaction().execute(async (trx) => {
    await insertPayers(trx, rows).execute();
    return withEarlierRecords(trx, rows, await insertRecords(trx, rows).execute());
  });
}

/**
 * `insertUsageRows` for PostgreSQL in one statement, the payers' insert a data-modifying CTE: one
 * round trip instead of four (begin, two inserts, commit), and as atomic.
 */
export async function insertUsageRowsAtOnce(
  db: Kysely<Database>,
  rows: readonly NewUsageRow[],
): Promise<Map<string, UsageRow>> {
  // The CTE only adds a table the insert does not name.
  const withPayers = db.with('new_payers', (creator) => insertPayers(creator, rows));
  const inserted = await insertRecords(withPayers as unknown as QueryCreator<Database>, rows).execute();
  return withEarlierRecords(db, rows, inserted);
}

/** New payers of the rows; those known already are left as they are. */
const insertPayers = (creator: QueryCreator<Database>, rows: readonly NewUsageRow[]) =>
  creator
    .insertInto('payers')
    .values(newPayers(rows))
    .onConflict((conflict) => conflict.column('wallet').doNothing());

/** The rows, returned as stored; a request id recorded before inserts nothing. */
const insertRecords = (creator: QueryCreator<Database>, rows: readonly NewUsageRow[]) =>
  creator
    .insertInto('usage_records')
    .values([...rows])
    .onConflict((conflict) => conflict.column('request_id').doNothing())
    .returningAll();

const newPayers = (rows: readonly NewUsageRow[]) =>
  [...new Map(rows.map((row) => [row.payer, row.created_at]))].map(([wallet, createdAt]) => ({
    wallet,
    credit_pico: 0,
    created_at: createdAt,
  }));

/** The inserted rows by request id, plus those of request ids recorded before (a retry: the first record stands). */
async function withEarlierRecords(
  db: Kysely<Database>,
  rows: readonly NewUsageRow[],
  inserted: UsageRow[],
): Promise<Map<string, UsageRow>> {
  const byRequest = new Map(inserted.map((row) => [row.request_id, row]));
  const known = rows.filter((row) => !byRequest.has(row.request_id)).map((row) => row.request_id);
  if (known.length > 0)
    for (const row of await db
      .selectFrom('usage_records')
      .selectAll()
      .where('request_id', 'in', known)
      .execute())
      byRequest.set(row.request_id, row);
  return byRequest;
}
