import { mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import { type Dialect, Kysely, PostgresDialect, SqliteAdapter, SqliteDialect, sql } from 'kysely';
import type pg from 'pg';
import { advisoryLeadership, type Leadership, soleLeadership } from './leadership.js';
import {
  advisoryLock,
  advisoryPayerLock,
  type KeyedLock,
  LockTimeoutError,
  type PayerLock,
  PayerLockTimeoutError,
  processLock,
  processPayerLock,
} from './payer-lock.js';
import type { Database } from './schema.js';
import { sqliteUsageWriter, USAGE_WRITER_LOST, type UsageWriter } from './sqlite-usage-writer.js';
import { type FileSync, WalSyncingSqliteDialect, walSync } from './sqlite-wal-sync.js';
import {
  type EarlierUsageRows,
  insertUsageRows,
  insertUsageRowsAtOnce,
  type NewUsageRow,
} from './usage-records.js';

export type StoreDialect = 'sqlite' | 'postgres';

/** The ledger's database: Kysely over SQLite or PostgreSQL, plus the per-payer lock that fits it. */
export interface Store {
  readonly db: Kysely<Database>;
  readonly dialect: StoreDialect;
  /**
   * Serializes work on one payer (opening, sending and confirming its settlement): in process
   * for SQLite, across every gateway instance (advisory lock) for PostgreSQL.
   */
  withPayerLock: PayerLock;
  /** The same serialization for any other name (the relayer key's sends): in process, or across instances. */
  withLock: KeyedLock;
  /** A role held by one process at a time among those sharing the store (the collector). */
  leadership(name: string): Leadership;
  /**
   * Inserts usage records (and new payers) in one transaction. A request id recorded before
   * inserts nothing; its stored row is returned. A SQLite file is written by a worker thread.
   */
  insertUsageRows(rows: readonly NewUsageRow[]): Promise<EarlierUsageRows>;
  close(): Promise<void>;
}

export interface StoreOptions {
  /** PostgreSQL: connections for queries. */
  poolSize?: number;
  /** PostgreSQL: connections holding payer locks, i.e. payers settled at once by this instance. */
  lockPoolSize?: number;
  /** PostgreSQL: how long to wait for a payer lock held by another instance. */
  lockTimeoutMs?: number;
  /**
   * PostgreSQL: how long a query may go unanswered before its connection is taken for dead (a
   * network silently dropping packets leaves it waiting about 15 minutes for TCP to give up).
   * Unset or 0: no bound.
   */
  queryTimeoutMs?: number;
  /** SQLite: how long a writer waits for the file lock. */
  busyTimeoutMs?: number;
  /** SQLite: how the WAL is flushed to stable storage (fsync on the thread pool). */
  fileSync?: FileSync;
  /**
   * SQLite file: held by this process alone until the store closes; another exclusive open, in
   * any process, is refused. The gateway's (and the migrate command's): its payer locks, relayer
   * send lock and collector leadership are in process. A reader (the reconcile command) shares it.
   */
  exclusive?: boolean;
}

export function isPostgresUrl(databaseUrl: string): boolean {
  return /^postgres(ql)?:\/\//i.test(databaseUrl);
}

/** Opens the store named by `DATABASE_URL`: a `postgres://` URL, `:memory:`, or a SQLite file path. */
export function openStore(databaseUrl: string, options: StoreOptions = {}): Store {
  return isPostgresUrl(databaseUrl) ? openPostgres(databaseUrl, options) : openSqlite(databaseUrl, options);
}

function openSqlite(path: string, options: StoreOptions): Store {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const release = options.exclusive && path !== ':memory:' ? holdExclusively(path) : undefined;
  try {
    return openSqliteFile(path, options, release);
  } catch (error) {
    release?.();
    throw error;
  }
}

/**
 * Takes `<path>.lock` for this process alone, or refuses: two gateways on one file would each
 * lock payers, send from the relayer key and collect in their own process (two collectors, two
 * sends with one nonce). SQLite's own lock (an exclusive transaction held open) on a file of its
 * own, so the ledger's connections (the usage worker thread's too) are untouched; the OS drops it
 * when the process dies, so a crash or a SIGKILL leaves nothing stale. Returns its release.
 */
function holdExclusively(path: string): () => void {
  const lock = new SqliteDatabase(`${path}.lock`, { timeout: 0 });
  try {
    lock.pragma('locking_mode = EXCLUSIVE');
    // Nothing is written: no journal file beside it.
    lock.pragma('journal_mode = MEMORY');
    lock.exec('begin exclusive');
  } catch (error) {
    lock.close();
    if ((error as { code?: unknown }).code !== 'SQLITE_BUSY') throw error;
    throw new Error(
      `another gateway process is using ${path}: stop it first (several instances need PostgreSQL)`,
      { cause: error },
    );
  }
  return () => lock.close();
}

function openSqliteFile(path: string, options: StoreOptions, release: (() => void) | undefined): Store {
  const busyTimeoutMs = options.busyTimeoutMs ?? 5000;
  const file = new SqliteDatabase(path);
  file.defaultSafeIntegers(true);
  file.pragma(`busy_timeout = ${busyTimeoutMs}`);
  file.pragma('foreign_keys = ON');
  // SQLite's own default page cache (better-sqlite3 raises it to 16 MB); the OS caches the file too.
  file.pragma('cache_size = -2000');
  let dialect: SqliteDialect;
  let usageWriter: UsageWriter | undefined;
  if (path === ':memory:') {
    dialect = new SqliteDialect({ database: preparingOnce(file) });
  } else {
    file.pragma('journal_mode = WAL');
    // A committed usage record must survive a power loss, not only a process crash: SQLite writes
    // the WAL (NORMAL) and the WAL is fsynced off the event loop before any write resolves.
    file.pragma('synchronous = NORMAL');
    const wal = walSync(path, options.fileSync);
    dialect = new WalSyncingSqliteDialect({ database: preparingOnce(file, wal.tracked) }, wal);
    // Every chat request writes a usage record: its insert, commit and fsync run on a worker thread.
    usageWriter = sqliteUsageWriter({ path, busyTimeoutMs });
  }
  const db = new Kysely<Database>({ dialect: withTransactionalDdl(dialect) });
  return {
    db,
    dialect: 'sqlite',
    withPayerLock: processPayerLock(),
    withLock: processLock(),
    leadership: () => soleLeadership,
    insertUsageRows: (rows) => usageWriter?.write(rows) ?? insertUsageRows(db, rows),
    async close() {
      await usageWriter?.close();
      await db.destroy();
      release?.();
    },
  };
}

/**
 * SQLite's schema changes are transactional, though Kysely's adapter says otherwise: said so, its
 * migrator runs pending migrations in one transaction, and one failing halfway (a full disk, a kill
 * during start-up) leaves none of its statements applied instead of a schema no start can migrate.
 */
function withTransactionalDdl(dialect: Dialect): Dialect {
  return {
    createDriver: () => dialect.createDriver(),
    createQueryCompiler: () => dialect.createQueryCompiler(),
    createIntrospector: (db) => dialect.createIntrospector(db),
    createAdapter: () => new TransactionalDdlSqliteAdapter(),
  };
}

class TransactionalDdlSqliteAdapter extends SqliteAdapter {
  override get supportsTransactionalDdl(): boolean {
    return true;
  }
}

/** Statements kept prepared; beyond this many distinct texts (batch sizes vary them) the cache starts over. */
const MAX_PREPARED = 500;

/**
 * Kysely prepares every query it runs; the gateway runs the same few on every request, so each
 * text is prepared once and its statement run again (better-sqlite3 statements are reusable).
 * `wrap` may stand in for a new statement (e.g. to note its writes).
 */
function preparingOnce(
  file: SqliteDatabase.Database,
  wrap: (statement: SqliteDatabase.Statement) => SqliteDatabase.Statement = (statement) => statement,
): SqliteDatabase.Database {
  const prepared = new Map<string, SqliteDatabase.Statement>();
  return new Proxy(file, {
    get(target, property) {
      if (property !== 'prepare') return Reflect.get(target, property, target);
      return (sql: string) => {
        let statement = prepared.get(sql);
        if (!statement) {
          if (prepared.size >= MAX_PREPARED) prepared.clear();
          statement = wrap(target.prepare(sql));
          prepared.set(sql, statement);
        }
        return statement;
      };
    },
  });
}

const INT8_OID = 20;
const CONNECT_TIMEOUT_MS = 5_000;
/** pg's error for a query unanswered within `query_timeout`. */
const QUERY_READ_TIMEOUT = 'Query read timeout';

/**
 * Takes a connection out of use. One whose query timed out is ended: marked at once (its pool
 * drops it on release instead of handing it to the next query) and its socket destroyed. An idle
 * one is destroyed as a network failure would: its pool drops it on the error.
 */
function closeConnection(client: pg.Client, idle: boolean): void {
  if (!idle) {
    client.end().catch(() => undefined);
    return;
  }
  (
    client as pg.Client & { connection: { stream: { destroy(error: Error): void } } }
  ).connection.stream.destroy(new Error('closed: another connection to the database timed out'));
}
/**
 * Session settings each connection asks for before the pool hands it out, each on its own, so a
 * server refusing one (tcp_user_timeout before PostgreSQL 12) keeps the others.
 */
async function applySessionSettings(client: pg.ClientBase, settings = SESSION_SETTINGS): Promise<void> {
  for (const [name, value] of settings)
    await client.query('select set_config($1, $2, false)', [name, value]).catch(() => undefined);
}

const SESSION_SETTINGS: ReadonlyArray<readonly [string, string]> = [
  // The server drops this connection's session within about a minute when the gateway's host
  // vanishes (power loss, a partition) instead of the OS's two hours, so the advisory locks it
  // held (a payer's, the collector's leadership) come free.
  ['tcp_keepalives_idle', '30'],
  ['tcp_keepalives_interval', '10'],
  ['tcp_keepalives_count', '3'],
  ['tcp_user_timeout', '60000'],
  // A lock connection sits idle while its holder settles: a server ending idle sessions
  // (idle_session_timeout) would free the lock under it.
  ['idle_session_timeout', '0'],
];
/**
 * How much longer than the server's statement_timeout the client waits for an answer: a statement
 * running too long is cancelled by the server (a definite failure: a usage record cancelled is not
 * written later); only a dead connection leaves the client's bound to run out.
 */
const CLIENT_TIMEOUT_GRACE_MS = 5_000;
const NAMED_LOCK_CONNECTIONS = 4;

/** int8 as bigint, per pool (not pg's global parsers); numeric (sums) stays a string. */
const typesOf = (driver: typeof pg) => ({
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === INT8_OID && format !== 'binary') return (value: string) => BigInt(value);
    return driver.types.getTypeParser(oid, format);
  },
});

function openPostgres(connectionString: string, options: StoreOptions): Store {
  // Loaded here: a gateway on SQLite does without pg's few megabytes of heap.
  const pg = createRequire(import.meta.url)('pg') as typeof import('pg').default;
  const pgTypes = typesOf(pg);
  // A database that cannot be reached fails a connection attempt in seconds (a 503), not after
  // minutes of TCP retries; idle connections are probed so a vanished server is noticed. The bound
  // is the client's, not the pool's: a pool's would also bound the wait for a free connection (a
  // payer waiting for a lock connection while others are settled).
  class TimedClient extends pg.Client {
    constructor(config?: pg.ClientConfig) {
      super({ ...config, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
    }

    // A query that timed out leaves its connection waiting for the answer: it is closed, so that
    // the pool drops it instead of handing it out again with every later query stuck behind, and
    // so are the idle ones, opened over the same network and as likely dead.
    // biome-ignore lint/suspicious/noExplicitAny: pg's overloads (promise or callback) are passed through.
    override query(...args: any[]): any {
      const result = (super.query as (...args: unknown[]) => unknown)(...args);
      if (result instanceof Promise)
        result.catch((error: unknown) => {
          if ((error as Error | undefined)?.message !== QUERY_READ_TIMEOUT) return;
          closeConnection(this, false);
          for (const client of idle) closeConnection(client, true);
        });
      return result;
    }
  }
  const idle = new Set<pg.Client>();
  const queryTimeoutMs = options.queryTimeoutMs ?? 0;
  const lockTimeouts = { lockMs: options.lockTimeoutMs ?? 60_000, queryMs: queryTimeoutMs };
  const connection = {
    connectionString,
    Client: TimedClient,
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
    onConnect: applySessionSettings,
    ...(queryTimeoutMs > 0 && { query_timeout: queryTimeoutMs }),
  };
  const queries =
    queryTimeoutMs > 0
      ? {
          ...connection,
          query_timeout: queryTimeoutMs + CLIENT_TIMEOUT_GRACE_MS,
          onConnect: (client: pg.ClientBase) =>
            applySessionSettings(client, [
              ...SESSION_SETTINGS,
              ['statement_timeout', String(queryTimeoutMs)],
            ]),
        }
      : connection;
  const pool = new pg.Pool({ ...queries, max: options.poolSize ?? 10, types: pgTypes });
  const lockPool = new pg.Pool({ ...connection, max: options.lockPoolSize ?? 16 });
  // Named locks are taken inside payer locks (the relayer's, while a payer is settled) and
  // leadership holds a connection for good: on payer-lock connections they could wait forever
  // for one that a payer lock holds. One connection per name in use (sends, leadership) suffices.
  const namedLockPool = new pg.Pool({ ...connection, max: NAMED_LOCK_CONNECTIONS });
  // A connection that fails emits 'error': on the pool while idle, on its client while a query or
  // a lock holds it (the pool's listener is detached then). Without a listener the process would end
  // on a database restart; the query in progress fails instead, and pg drops the connection.
  const ignoreConnectionError = () => {};
  for (const connections of [pool, lockPool, namedLockPool]) {
    connections.on('error', ignoreConnectionError);
    connections.on('connect', (client) => client.on('error', ignoreConnectionError));
    connections.on('release', (_error, client) => idle.add(client));
    connections.on('acquire', (client) => idle.delete(client));
    connections.on('remove', (client) => idle.delete(client));
  }
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  const leaderships: Leadership[] = [];
  return {
    db,
    dialect: 'postgres',
    withPayerLock: advisoryPayerLock(lockPool, lockTimeouts),
    withLock: advisoryLock(namedLockPool, lockTimeouts),
    leadership(name) {
      const leadership = advisoryLeadership(namedLockPool, name);
      leaderships.push(leadership);
      return leadership;
    },
    insertUsageRows: (rows) => insertUsageRowsAtOnce(db, rows),
    async close() {
      await Promise.all(leaderships.map((leadership) => leadership.release()));
      await db.destroy();
      await Promise.all([lockPool.end(), namedLockPool.end()]);
    },
  };
}

// Connection failures (node, PostgreSQL's connection exception class 08, shutdowns, too many
// clients) and SQLite's lock wait running out: the query was fine, the database was not there.
const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  // DNS that cannot answer now (a database container restarting), a connection given up locally.
  'EAI_AGAIN',
  'ECONNABORTED',
  '57P01',
  '57P02',
  '57P03',
  '53300',
  // A statement cancelled (an operator's statement_timeout ran out, or pg_cancel_backend).
  '57014',
  // A transaction aborted for another's sake (a deadlock broken, a serialization conflict): its
  // retry succeeds.
  '40P01',
  '40001',
  // A server that cannot take writes now: read-only after a failover, its disk or memory full.
  '25006',
  '53100',
  '53200',
  'SQLITE_BUSY',
  'SQLITE_FULL',
  USAGE_WRITER_LOST,
]);

/** The database could not be reached, or a lock held elsewhere did not come free: retrying may succeed. */
export function isStoreUnavailable(error: unknown): boolean {
  if (error instanceof LockTimeoutError || error instanceof PayerLockTimeoutError) return true;
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && (UNAVAILABLE_CODES.has(code) || code.startsWith('08'))) return true;
  return (
    error instanceof Error &&
    /^Connection terminated|^timeout expired$|timeout exceeded when trying to connect|Client has encountered a connection error|^Query read timeout$|^Client was closed and is not queryable$/.test(
      error.message,
    )
  );
}

/** A trivial query, for `/health`. */
export async function pingStore(store: Store): Promise<void> {
  await sql`select 1`.execute(store.db);
}
