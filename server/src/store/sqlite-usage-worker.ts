/**
 * Worker thread writing usage records to a SQLite file on a connection of its own, so that the
 * inserts, the commit, WAL checkpoints and the fsync of every chat request run beside the event
 * loop instead of on it. Speaks `UsageWorkerRequest` / `UsageWorkerReply` (sqlite-usage-writer.ts).
 */
import { parentPort, workerData } from 'node:worker_threads';
import SqliteDatabase from 'better-sqlite3';
import type { NewUsageRow, UsageRow } from './usage-records.js';

export interface UsageWorkerOptions {
  path: string;
  busyTimeoutMs: number;
}
export interface UsageWorkerRequest {
  id: number;
  rows: NewUsageRow[];
}
export type UsageWorkerReply =
  | { id: number; rows: UsageRow[] }
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

// Prepared on first use: the tables may not exist until the migrations have run.
let insertAll: ReturnType<typeof prepareInsertAll> | undefined;
const inserts = new Map<string, SqliteDatabase.Statement>();

function prepareInsertAll() {
  const insertPayer = file.prepare(
    'insert into payers (wallet, credit_pico, created_at) values (?, 0, ?) on conflict (wallet) do nothing',
  );
  const findRecord = file.prepare('select * from usage_records where request_id = ?');
  return file.transaction((rows: NewUsageRow[]) => {
    for (const row of rows) insertPayer.run(row.payer, row.created_at);
    // A request id recorded before (a retry) inserts nothing: the first record stands.
    return rows.map((row) => (insertRecord(row).get(row) ?? findRecord.get(row.request_id)) as UsageRow);
  });
}

/** The insert of a row's columns, named after its keys (the ledger sends every row with the same ones). */
function insertRecord(row: NewUsageRow): SqliteDatabase.Statement {
  const columns = Object.keys(row);
  const key = columns.join();
  let statement = inserts.get(key);
  if (!statement) {
    statement = file.prepare(
      `insert into usage_records (${key}) values (${columns.map((column) => `@${column}`).join()}) ` +
        'on conflict (request_id) do nothing returning *',
    );
    inserts.set(key, statement);
  }
  return statement;
}

parentPort?.on('message', ({ id, rows }: UsageWorkerRequest) => {
  let reply: UsageWorkerReply;
  try {
    insertAll ??= prepareInsertAll();
    reply = { id, rows: insertAll.immediate(rows) };
  } catch (error) {
    const { message, code } = error as { message?: string; code?: unknown };
    reply = {
      id,
      error: { message: String(message ?? error), code: typeof code === 'string' ? code : undefined },
    };
  }
  parentPort?.postMessage(reply);
});
