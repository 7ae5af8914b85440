import type { Insertable, Kysely, QueryCreator, Selectable } from 'kysely';
import type { Database, UsageRecordsTable } from './schema.js';

export type NewUsageRow = Insertable<UsageRecordsTable>;
export type UsageRow = Selectable<UsageRecordsTable>;

/**
 * The rows recorded before under some of these request ids (a retry: the first record stands), by
 * request id. Every other row was inserted as given.
 */
export type EarlierUsageRows = Map<string, UsageRow>;

/** Inserts usage records, and their payers when new, in one transaction (one commit for all). */
export async function insertUsageRows(
  db: Kysely<Database>,
  rows: readonly NewUsageRow[],
): Promise<EarlierUsageRows> {
  return db.transaction().execute(async (trx) => {
    await insertPayers(trx, rows).execute();
    return earlierRecords(trx, rows, await insertRecords(trx, rows).execute());
  });
}

/**
 * `insertUsageRows` for PostgreSQL in one statement, the payers' insert a data-modifying CTE: one
 * round trip instead of four (begin, two inserts, commit), and as atomic.
 */
export async function insertUsageRowsAtOnce(
  db: Kysely<Database>,
  rows: readonly NewUsageRow[],
): Promise<EarlierUsageRows> {
  // The CTE only adds a table the insert does not name.
  const withPayers = db.with('new_payers', (creator) => insertPayers(creator, rows));
  const inserted = await insertRecords(withPayers as unknown as QueryCreator<Database>, rows).execute();
  return earlierRecords(db, rows, inserted);
}

/** New payers of the rows; those known already are left as they are. */
const insertPayers = (creator: QueryCreator<Database>, rows: readonly NewUsageRow[]) =>
  creator
    .insertInto('payers')
    .values(newPayers(rows))
    .onConflict((conflict) => conflict.column('wallet').doNothing());

/** The rows; a request id recorded before inserts nothing. Returns the request ids inserted. */
const insertRecords = (creator: QueryCreator<Database>, rows: readonly NewUsageRow[]) =>
  creator
    .insertInto('usage_records')
    .values([...rows])
    .onConflict((conflict) => conflict.column('request_id').doNothing())
    .returning('request_id');

// In wallet order: two instances inserting the same new payers in opposite orders would each wait
// for the other's row (a deadlock PostgreSQL breaks by aborting one batch).
const newPayers = (rows: readonly NewUsageRow[]) =>
  [...new Map(rows.map((row) => [row.payer, row.created_at]))]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([wallet, createdAt]) => ({
      wallet,
      credit_pico: 0,
      created_at: createdAt,
    }));

/** The stored rows of the request ids not inserted now. */
async function earlierRecords(
  db: Kysely<Database>,
  rows: readonly NewUsageRow[],
  inserted: ReadonlyArray<{ request_id: string }>,
): Promise<EarlierUsageRows> {
  const insertedIds = new Set(inserted.map((row) => row.request_id));
  const known = rows.filter((row) => !insertedIds.has(row.request_id)).map((row) => row.request_id);
  if (known.length === 0) return new Map();
  const stored = await db.selectFrom('usage_records').selectAll().where('request_id', 'in', known).execute();
  return new Map(stored.map((row) => [row.request_id, row]));
}

/**
 * The columns of a usage row in the order the SQLite worker receives them: rows cross the thread
 * boundary as arrays of values, which clone faster than objects repeating every key.
 */
export const USAGE_COLUMNS = [
  'request_id',
  'payer',
  'rail',
  'model',
  'input_tokens',
  'cache_read_tokens',
  'cache_write_tokens',
  'output_tokens',
  'reasoning_tokens',
  'provider_cost_pico',
  'commission_pico',
  'total_pico',
  'exact',
  'created_at',
  'settlement_id',
] as const satisfies ReadonlyArray<keyof NewUsageRow>;
