/**
 * Worker thread writing usage records to a SQLite file on a connection of its own, so that the
 * inserts, the commit, WAL checkpoints and the fsync of every chat request run beside the event
 * loop instead of on it. Speaks `UsageWorkerRequest` / `UsageWorkerReply` (sqlite-usage-writer.ts).
 */
import { parentPort, workerData } from 'node:worker_threads';
import SqliteDatabase from 'better-sqlite3';
import { USAGE_COLUMNS, type UsageRow } from './usage-records.js';

export interface UsageWorkerOptions {
  path: string;
  busyTimeoutMs: number;
}
export interface UsageWorkerRequest {
  id: number;
  /** Each row's values in `USAGE_COLUMNS` order. */
  rows: unknown[][];
}
export type UsageWorkerReply =
  | { id: number; earlier: UsageRow[] }
  | { id: number; error: { message: string; code?: string } };

const { path, busyTimeoutMs } = workerData as UsageWorkerOptions;
const file = new SqliteDatabase(path);
file.defaultSafeIntegers(true);
file.pragma(`busy_timeout = ${busyTimeoutMs}`);
file.pragma('foreign_keys = ON');
// Inserts touch a few pages per index; the OS caches the file too.
file.pragma('cache_size = -512');
// Commits happen on this thread, so SQLite itself may fsync the WAL in each one: a write is
// acknowledged only once it is durable, as on the main connection.
file.pragma('synchronous = FULL');

const PAYER = USAGE_COLUMNS.indexOf('payer');
const REQUEST_ID = USAGE_COLUMNS.indexOf('request_id');
const CREATED_AT = USAGE_COLUMNS.indexOf('created_at');

// Prepared on first use: the tables may not exist until the migrations have run.
let insertAll: ReturnType<typeof prepareInsertAll> | undefined;

function prepareInsertAll() {
  const insertPayer = file.prepare(
    'insert into payers (wallet, credit_pico, created_at) values (?, 0, ?) on conflict (wallet) do nothing',
  );
  const insertRecord = file.prepare(
    `insert into usage_records (${USAGE_COLUMNS.join()}) values (${USAGE_COLUMNS.map(() => '?').join()}) ` +
      'on conflict (request_id) do nothing',
  );
  const findRecord = file.prepare('select * from usage_records where request_id = ?');
  return file.transaction((rows: unknown[][]) => {
    for (const row of rows) insertPayer.run(row[PAYER], row[CREATED_AT]);
    // A request id recorded before (a retry) inserts nothing: the first record stands.
    const earlier: UsageRow[] = [];
    for (const row of rows)
      if (insertRecord.run(row).changes === 0) earlier.push(findRecord.get(row[REQUEST_ID]) as UsageRow);
    return earlier;
  });
}

parentPort?.on('message', ({ id, rows }: UsageWorkerRequest) => {
  let reply: UsageWorkerReply;
  try {
    insertAll ??= prepareInsertAll();
    reply = { id, earlier: insertAll.immediate(rows) };
  } catch (error) {
    const { message, code } = error as { message?: string; code?: unknown };
    reply = {
      id,
      error: { message: String(message ?? error), code: typeof code === 'string' ? code : undefined },
    };
  }
  parentPort?.postMessage(reply);
});
