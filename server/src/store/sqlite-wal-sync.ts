import { closeSync, fsync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import { promisify } from 'node:util';
import type SqliteDatabase from 'better-sqlite3';
import {
  CompiledQuery,
  type DatabaseConnection,
  SqliteDialect,
  type SqliteDialectConfig,
  SqliteDriver,
} from 'kysely';

/** Flushes a file to stable storage; `fs.fsync` runs on libuv's thread pool, off the event loop. */
export type FileSync = (fd: number) => Promise<void>;

/**
 * SQLite in WAL mode with `synchronous = FULL` fsyncs the WAL inside every commit, on the thread
 * that commits: with better-sqlite3 that is the event loop, stalled for the whole fsync. Here
 * SQLite commits with `synchronous = NORMAL` (frames written, not flushed) and the WAL file is then
 * fsynced off the event loop: every write still resolves only once it is durable (as with FULL),
 * while the event loop and other queries go on. Writes committed while a flush runs share the next
 * one. Nothing leaves the gateway on the strength of a write before that write is durable; a read
 * may see another's commit a fraction of a millisecond before it is (PostgreSQL would not).
 */
export interface WalSync {
  /** A prepared statement as Kysely must run it: its writes are noted. */
  tracked(statement: SqliteDatabase.Statement): SqliteDatabase.Statement;
  /** Whether anything was written since the last call. */
  takeWrites(): boolean;
  /** Resolves once everything committed before the call is on stable storage. */
  flush(): Promise<void>;
  close(): void;
}

const fsyncFile: FileSync = promisify(fsync);

export function walSync(path: string, sync: FileSync = fsyncFile): WalSync {
  let wrote = false;
  let wal: number | undefined;
  let running: Promise<void> | undefined;
  let next: Promise<void> | undefined;
  const syncWal = async () => {
    if (wal === undefined) {
      wal = openSync(`${path}-wal`, 'r');
      // SQLite creates the WAL with the first connection; its directory entry must survive too.
      const directory = openSync(dirname(path), 'r');
      try {
        await sync(directory);
      } finally {
        closeSync(directory);
      }
    }
    await sync(wal);
  };
  const start = () => {
    running = syncWal().finally(() => {
      running = undefined;
    });
    return running;
  };
  return {
    tracked: (statement) =>
      trackingWrites(statement, (result) => {
        wrote = true;
        return result;
      }),
    takeWrites() {
      const taken = wrote;
      wrote = false;
      return taken;
    },
    flush() {
      if (!running) return start();
      // The fsync under way may have begun before the caller's commit: wait for the one after it.
      next ??= running
        .catch(() => {})
        .then(() => {
          next = undefined;
          return start();
        });
      return next;
    },
    close() {
      if (wal !== undefined) closeSync(wal);
    },
  };
}

/** A statement that may write runs through `mark`, so that a flush knows there is something to flush. */
function trackingWrites(
  statement: SqliteDatabase.Statement,
  mark: <T>(result: T) => T,
): SqliteDatabase.Statement {
  if (statement.readonly) return statement;
  const run = statement.run.bind(statement);
  const all = statement.all.bind(statement);
  const get = statement.get.bind(statement);
  return Object.assign(Object.create(statement), {
    run: (...parameters: unknown[]) => mark(run(...parameters)),
    all: (...parameters: unknown[]) => mark(all(...parameters)),
    get: (...parameters: unknown[]) => mark(get(...parameters)),
  });
}

/** Kysely's SQLite dialect whose writes resolve once flushed. */
export class WalSyncingSqliteDialect extends SqliteDialect {
  readonly #config: SqliteDialectConfig;
  readonly #wal: WalSync;

  constructor(config: SqliteDialectConfig, wal: WalSync) {
    super(config);
    this.#config = config;
    this.#wal = wal;
  }

  override createDriver() {
    return new WalSyncingSqliteDriver(this.#config, this.#wal);
  }
}

class WalSyncingSqliteDriver extends SqliteDriver {
  readonly #wal: WalSync;

  constructor(config: SqliteDialectConfig, wal: WalSync) {
    super(config);
    this.#wal = wal;
  }

  // Another connection writes the same file (the usage writer's worker thread). A deferred
  // transaction that read before that one committed could not write any more (SQLITE_BUSY on a
  // stale snapshot); taking the write lock at the start makes its reads and writes one snapshot.
  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin immediate'));
  }

  // Kysely releases the connection after a statement run alone and after a transaction's commit
  // or rollback, and the query resolves after that: once its writes are flushed.
  override async releaseConnection(): Promise<void> {
    const wrote = this.#wal.takeWrites();
    await super.releaseConnection();
    if (wrote) await this.#wal.flush();
  }

  override async destroy(): Promise<void> {
    await super.destroy();
    this.#wal.close();
  }
}
