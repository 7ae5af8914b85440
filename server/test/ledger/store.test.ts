import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import SqliteDatabase from 'better-sqlite3';
import { Migrator, sql } from 'kysely';
import { afterAll, describe, expect, test } from 'vitest';
import { buildApp } from '../../src/app.js';
import { findUsageRecord, recordUsage, recordUsages, UsageConflictError } from '../../src/billing/ledger.js';
import { zeroUsage } from '../../src/providers/usage.js';
import { isPostgresUrl, isStoreUnavailable, openStore, type Store } from '../../src/store/database.js';
import { migrateToLatest } from '../../src/store/migrate.js';
import { migrations } from '../../src/store/migrations/index.js';
import { sqliteUsageWriter } from '../../src/store/sqlite-usage-writer.js';
import { testConfig } from '../support/config.js';
import { createTestDatabase, testDialects } from '../support/db.js';

const run = promisify(execFile);
const scratch = mkdtempSync(join(tmpdir(), 'paygate-store-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const TABLES = [
  'payers',
  'sessions',
  'settlements',
  'usage_records',
  'x402_authorizations',
  'relayer_sends',
  'relayer_nonces',
];

describe('SQLite file store', () => {
  test('the gateway creates the file and its directory at start, in WAL mode, migrated', async () => {
    const file = join(scratch, 'nested', 'dir', 'gateway.sqlite');
    const app = await buildApp(testConfig({ databaseUrl: file }));
    try {
      expect(existsSync(file)).toBe(true);
      const health = await app.inject({ method: 'GET', url: '/health' });
      expect(health.json().data.dependencies.database).toEqual({ status: 'up', detail: 'sqlite' });
    } finally {
      await app.close();
    }
    const store = openStore(file);
    try {
      const mode = await sql<{ journal_mode: string }>`pragma journal_mode`.execute(store.db);
      expect(mode.rows[0]?.journal_mode).toBe('wal');
      const tables = await sql<{ name: string }>`select name from sqlite_master where type = 'table'`.execute(
        store.db,
      );
      expect(tables.rows.map((row) => row.name)).toEqual(expect.arrayContaining(TABLES));
      expect(await migrateToLatest(store)).toEqual([]);
    } finally {
      await store.close();
    }
  });

  test('npm run migrate applies the migrations to DATABASE_URL once', async () => {
    const file = join(scratch, 'cli', 'gateway.sqlite');
    const env = { ...process.env, DATABASE_URL: file };
    const first = await run('npm', ['run', '--silent', 'migrate'], {
      env,
      cwd: join(import.meta.dirname, '../..'),
    });
    expect(first.stdout.trim()).toBe(`applied: ${Object.keys(migrations).join(', ')}`);
    const again = await run('npm', ['run', '--silent', 'migrate'], {
      env,
      cwd: join(import.meta.dirname, '../..'),
    });
    expect(again.stdout.trim()).toBe('database is up to date');
  });

  test('npm run migrate names DATABASE_URL when it is neither a path nor a postgres URL', async () => {
    const env = { ...process.env, DATABASE_URL: 'mysql://localhost/db' };
    const failed = await run('npm', ['run', '--silent', 'migrate'], {
      env,
      cwd: join(import.meta.dirname, '../..'),
    }).catch((error: { code: number; stderr: string }) => error);
    expect(failed).toMatchObject({ code: 1 });
    expect((failed as { stderr: string }).stderr).toContain('Invalid configuration: DATABASE_URL');
  });
});

describe('SQLite file held by one gateway process', () => {
  const inUse = (file: string) => `another gateway process is using ${file}`;

  /** A process of its own that opens `file` exclusively, as a gateway does, and waits to be killed. */
  async function holderProcess(file: string) {
    const script = join(scratch, `holder-${Date.now()}.ts`);
    const database = pathToFileURL(join(import.meta.dirname, '../../src/store/database.ts')).href;
    writeFileSync(
      script,
      // Kept referenced, as a gateway keeps its store: a store collected as garbage is closed.
      `import { openStore } from '${database}';\nconst store = openStore(${JSON.stringify(file)}, { exclusive: true });\nconsole.log('held');\nsetInterval(() => store, 60_000);\n`,
    );
    const child = spawn(process.execPath, ['--import', 'tsx', script], {
      cwd: join(import.meta.dirname, '../..'),
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const exited = once(child, 'exit');
    await once(child.stdout, 'data');
    return { child, exited };
  }

  test('a second exclusive open is refused while the first is open, in the same process too, and allowed after close', async () => {
    const file = join(scratch, 'held', 'gateway.sqlite');
    const first = openStore(file, { exclusive: true });
    try {
      await migrateToLatest(first);
      expect(() => openStore(file, { exclusive: true })).toThrow(inUse(file));
      // The gateway refuses to start on it, before anything else is opened.
      await expect(buildApp(testConfig({ databaseUrl: file }))).rejects.toThrow(inUse(file));
      // A reader (the reconcile command) shares the file with its holder.
      const reader = openStore(file);
      try {
        expect(await reader.db.selectFrom('payers').selectAll().execute()).toEqual([]);
      } finally {
        await reader.close();
      }
    } finally {
      await first.close();
    }
    const second = openStore(file, { exclusive: true });
    await second.close();
    // :memory: is a database of its own: nothing to hold.
    const memory = [openStore(':memory:', { exclusive: true }), openStore(':memory:', { exclusive: true })];
    await Promise.all(memory.map((store) => store.close()));
  });

  test('another process holding the file refuses this one; killed with SIGKILL, it leaves no stale lock', async () => {
    const file = join(scratch, 'killed', 'gateway.sqlite');
    const holder = await holderProcess(file);
    try {
      expect(() => openStore(file, { exclusive: true })).toThrow(inUse(file));
      const migrate = await run('npm', ['run', '--silent', 'migrate'], {
        env: { ...process.env, DATABASE_URL: file },
        cwd: join(import.meta.dirname, '../..'),
      }).catch((error: { code: number; stderr: string }) => error);
      expect(migrate).toMatchObject({ code: 1, stderr: expect.stringContaining(inUse(file)) });
    } finally {
      holder.child.kill('SIGKILL');
      await holder.exited;
    }
    const store = openStore(file, { exclusive: true });
    await store.close();
  });
});

describe('SQLite durability', () => {
  /** A stand-in for fsync that completes when the test says so, counting the flushes. */
  function heldSync() {
    const flushes: Array<() => void> = [];
    let held = false;
    return {
      flushes,
      hold: (on: boolean) => {
        held = on;
      },
      sync: (_fd: number) =>
        new Promise<void>((resolve) => {
          if (held) flushes.push(resolve);
          else resolve();
        }),
    };
  }
  const settled = async (promise: Promise<unknown>) => {
    let done = false;
    void promise.then(() => {
      done = true;
    });
    for (let turn = 0; turn < 5; turn++) await new Promise((resolve) => setImmediate(resolve));
    return done;
  };
  const insertPayer = (store: Store, wallet: `0x${string}`) =>
    store.db.insertInto('payers').values({ wallet, credit_pico: 0n, created_at: 0n }).execute();

  test('a write resolves only once the WAL is flushed; writes committed meanwhile share the next flush', {
    timeout: 10_000,
  }, async () => {
    const fsync = heldSync();
    const store = openStore(join(scratch, 'durable', 'gateway.sqlite'), { fileSync: fsync.sync });
    try {
      await migrateToLatest(store);
      fsync.hold(true);
      const written = insertPayer(store, '0x01');
      expect(await settled(written)).toBe(false);
      expect(fsync.flushes).toHaveLength(1);
      // Reads go on meanwhile; two more writes commit and wait for a flush begun after theirs.
      expect(await store.db.selectFrom('payers').select('wallet').execute()).toEqual([{ wallet: '0x01' }]);
      const queued = Promise.all([insertPayer(store, '0x02'), insertPayer(store, '0x03')]);
      expect(await settled(queued)).toBe(false);
      expect(fsync.flushes).toHaveLength(1);
      fsync.flushes.shift()?.();
      await written;
      expect(await settled(queued)).toBe(false);
      expect(fsync.flushes).toHaveLength(1);
      fsync.flushes.shift()?.();
      await queued;
      // Reads alone flush nothing.
      await store.db.selectFrom('payers').selectAll().execute();
      expect(fsync.flushes).toHaveLength(0);
    } finally {
      fsync.hold(false);
      await store.close();
    }
  });
});

describe('SQLite usage writer (worker thread)', () => {
  const entry = (requestId: string) => ({
    requestId,
    payer: '0x00000000000000000000000000000000000000aa' as const,
    rail: 'session' as const,
    model: 'anthropic/claude-sonnet-4.5',
    usage: {
      inputTokens: 3,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
      outputTokens: 5,
      reasoningTokens: 0,
      exact: true,
    },
    cost: { providerPicoUsd: 70n, commissionPicoUsd: 7n, totalPicoUsd: 77n },
  });

  test('a failed write names the cause; the next one works; closing waits for the writes under way', async () => {
    const file = join(scratch, 'worker', 'gateway.sqlite');
    const store = openStore(file);
    try {
      // Before the migrations there is no table: the worker answers with SQLite's error.
      await expect(recordUsage(store, entry('early'))).rejects.toThrow(/no such table: payers/);
      await migrateToLatest(store);
      const first = await recordUsage(store, entry('req-1'));
      expect(first).toMatchObject({ requestId: 'req-1', cost: { totalPicoUsd: 77n }, settlementId: null });
      // The store's own connection reads what the worker committed; a retry returns the stored record.
      expect(await findUsageRecord(store, 'req-1')).toEqual(first);
      expect(await recordUsage(store, entry('req-1'))).toEqual(first);
      await expect(
        recordUsage(store, { ...entry('req-1'), usage: { ...entry('req-1').usage, outputTokens: 6 } }),
      ).rejects.toBeInstanceOf(UsageConflictError);
      const underWay = recordUsage(store, entry('req-2'));
      await store.close();
      expect(await underWay).toMatchObject({ requestId: 'req-2' });
      await expect(recordUsage(store, entry('req-late'))).rejects.toThrow('the store is closed');
    } finally {
      await store.close();
    }
    const reopened = openStore(file);
    try {
      expect(await findUsageRecord(reopened, 'req-2')).toMatchObject({
        requestId: 'req-2',
        usage: { outputTokens: 5 },
      });
    } finally {
      await reopened.close();
    }
  });

  test('a worker that dies fails the writes it held; the next write starts another', async () => {
    const directory = join(scratch, 'not-yet');
    const file = join(directory, 'gateway.sqlite');
    // The worker cannot open a file in a directory that does not exist: it ends before answering.
    const writer = sqliteUsageWriter({ path: file, busyTimeoutMs: 1000 });
    try {
      const lost = await writer.write([]).catch((error: unknown) => error);
      expect(lost).toMatchObject({
        message: expect.stringMatching(/directory does not exist|unable to open/),
      });
      // Retried by the recorder: the write may have committed, and under its request id it is found.
      expect(isStoreUnavailable(lost)).toBe(true);
      const store = openStore(file);
      try {
        await migrateToLatest(store);
        const written = await writer.write([
          {
            request_id: 'req-after-restart',
            payer: '0x00000000000000000000000000000000000000aa',
            rail: 'session',
            model: 'anthropic/claude-sonnet-4.5',
            input_tokens: 1,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            output_tokens: 1,
            reasoning_tokens: 0,
            provider_cost_pico: 0,
            commission_pico: 0,
            total_pico: 0,
            exact: 1,
            created_at: 0,
            settlement_id: null,
          },
        ]);
        expect(written.size).toBe(0); // nothing recorded before under that id
        expect(await findUsageRecord(store, 'req-after-restart')).toMatchObject({
          requestId: 'req-after-restart',
        });
      } finally {
        await store.close();
      }
    } finally {
      await writer.close();
    }
  });

  test('a transaction that read before the worker wrote can still write: it holds the write lock from its start', async () => {
    const file = join(scratch, 'snapshot', 'gateway.sqlite');
    const store = openStore(file);
    try {
      await migrateToLatest(store);
      await recordUsage(store, entry('req-first')); // the worker is up
      let written: Promise<unknown> | undefined;
      await store.db.transaction().execute(async (trx) => {
        await trx.selectFrom('payers').selectAll().execute();
        written = recordUsage(store, entry('req-meanwhile'));
        // Time for the worker to commit, were it not waiting for this transaction.
        await new Promise((resolve) => setTimeout(resolve, 200));
        await trx
          .insertInto('payers')
          .values({ wallet: '0x00000000000000000000000000000000000000bb', credit_pico: 0, created_at: 0 })
          .execute();
      });
      expect(await written).toMatchObject({ requestId: 'req-meanwhile' });
      expect(await store.db.selectFrom('payers').select('wallet').orderBy('wallet').execute()).toHaveLength(
        2,
      );
    } finally {
      await store.close();
    }
  });

  test('a write that finds the file locked past the busy timeout fails as unavailable, and the next one succeeds', async () => {
    const file = join(scratch, 'locked', 'gateway.sqlite');
    const store = openStore(file, { busyTimeoutMs: 50 });
    const other = new SqliteDatabase(file);
    try {
      await migrateToLatest(store);
      other.exec('begin immediate');
      const refused = await recordUsage(store, entry('req-locked')).catch((error: unknown) => error);
      expect(refused).toMatchObject({ code: 'SQLITE_BUSY' });
      expect(isStoreUnavailable(refused)).toBe(true);
      other.exec('rollback');
      expect(await recordUsage(store, entry('req-locked'))).toMatchObject({ requestId: 'req-locked' });
    } finally {
      other.close();
      await store.close();
    }
  });
});

test('a SQLite migration failing halfway leaves none of its changes: the next start migrates again', async () => {
  const store = openStore(join(scratch, 'half-migrated', 'gateway.sqlite'));
  try {
    const failing = new Migrator({
      db: store.db,
      provider: {
        getMigrations: async () => ({
          '0001-half': {
            async up(db) {
              await db.schema.dropTable('payers').ifExists().execute();
              await db.schema.createTable('half').addColumn('id', 'integer').execute();
              throw new Error('the disk is full');
            },
          },
        }),
      },
    });
    const { error } = await failing.migrateToLatest();
    expect(error).toMatchObject({ message: 'the disk is full' });
    const tables = await sql<{ name: string }>`select name from sqlite_master where type = 'table'`.execute(
      store.db,
    );
    expect(tables.rows.map((row) => row.name)).not.toContain('half');
    // The real migrations still apply.
    await migrateToLatest(store);
  } finally {
    await store.close();
  }
});

describe.each(testDialects)('migrations on %s', (dialect) => {
  test('create every table and apply once', async () => {
    const database = await createTestDatabase(dialect);
    try {
      const store = await database.open();
      expect(store.dialect).toBe(dialect);
      expect(isPostgresUrl(database.url)).toBe(dialect === 'postgres');
      expect(await migrateToLatest(store)).toEqual([]);
      for (const table of TABLES) {
        const count = await store.db
          .selectFrom(table as 'payers')
          .select((eb) => eb.fn.countAll().as('n'))
          .executeTakeFirstOrThrow();
        expect(count.n).toBe(0n);
      }
    } finally {
      await database.drop();
    }
  });
});

test('a PostgreSQL server that never answers fails a connection in 5 s, as unavailable (a 503)', async () => {
  // Accepts the TCP connection and says nothing, as a blackholed database host.
  const silent = createServer(() => {});
  silent.listen(0, '127.0.0.1');
  await once(silent, 'listening');
  const store = openStore(`postgres://postgres@127.0.0.1:${(silent.address() as AddressInfo).port}/none`);
  try {
    const started = Date.now();
    const error = await sql`select 1`.execute(store.db).catch((caught: unknown) => caught);
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(isStoreUnavailable(error)).toBe(true);
  } finally {
    await store.close();
    silent.close();
  }
});

describe.runIf(testDialects.includes('postgres'))('PostgreSQL connections', () => {
  test('ask the server to drop a vanished gateway within about a minute (its advisory locks come free), and to keep idle sessions', async () => {
    const database = await createTestDatabase('postgres');
    try {
      // A server that ends idle sessions (its configuration, here given at connection).
      const url = new URL(database.url);
      url.searchParams.set('options', `${url.searchParams.get('options')} -c idle_session_timeout=1000`);
      const store = openStore(url.toString());
      try {
        const shown = await sql<{
          idle: string;
          timeout: string;
          session: string;
        }>`select current_setting('tcp_keepalives_idle') as idle, current_setting('tcp_user_timeout') as timeout,
             current_setting('idle_session_timeout') as session`.execute(store.db);
        // Idle sessions are kept: ended, a lock connection idle while its holder settles frees the lock.
        expect(shown.rows[0]).toEqual({ idle: '30', timeout: '60000', session: '0' });
      } finally {
        await store.close();
      }
    } finally {
      await database.drop();
    }
  });

  test('a transaction PostgreSQL aborts to break a deadlock is transient: retried, not a lost usage record', async () => {
    const database = await createTestDatabase('postgres');
    const store = await database.open();
    try {
      const [x, y] = [
        '0x00000000000000000000000000000000000000c1',
        '0x00000000000000000000000000000000000000c2',
      ] as const;
      let firstDone = 0;
      let bothFirst: () => void = () => {};
      const barrier = new Promise<void>((resolve) => {
        bothFirst = resolve;
      });
      // Two new payers inserted in opposite orders by two transactions: each waits for the other.
      const insertBoth = (first: `0x${string}`, second: `0x${string}`) =>
        store.db.transaction().execute(async (trx) => {
          const insert = (wallet: `0x${string}`) =>
            trx
              .insertInto('payers')
              .values({ wallet, credit_pico: 0n, created_at: 0 })
              .onConflict((conflict) => conflict.column('wallet').doNothing())
              .execute();
          await insert(first);
          if (++firstDone === 2) bothFirst();
          await barrier;
          await insert(second);
        });
      const outcomes = await Promise.allSettled([insertBoth(x, y), insertBoth(y, x)]);
      const aborted = outcomes.find((outcome) => outcome.status === 'rejected') as PromiseRejectedResult;
      expect(aborted.reason).toMatchObject({ code: '40P01' });
      expect(isStoreUnavailable(aborted.reason)).toBe(true);
    } finally {
      await database.drop();
    }
  });

  test('a usage write held behind a lock past the query timeout fails for good: the server cancels it, it is not written later', async () => {
    const database = await createTestDatabase('postgres');
    const store = await database.open({ queryTimeoutMs: 300 });
    const blocker = openStore(database.url, { poolSize: 1 });
    try {
      const record = {
        requestId: 'held-behind-a-migration',
        payer: '0x00000000000000000000000000000000000000c3' as const,
        rail: 'session' as const,
        model: 'anthropic/claude-sonnet-4.5',
        usage: zeroUsage(true),
        cost: { providerPicoUsd: 1n, commissionPicoUsd: 0n, totalPicoUsd: 1n },
      };
      // As a migration building an index over the table would, for longer than the timeout.
      const lockedFor = (ms: number) =>
        blocker.db.transaction().execute(async (trx) => {
          await sql`lock table usage_records in share mode`.execute(trx);
          await new Promise((resolve) => setTimeout(resolve, ms));
        });
      const locked = lockedFor(1_000);
      await new Promise((resolve) => setTimeout(resolve, 50));
      const error = await recordUsages(store, [record]).catch((caught: unknown) => caught);
      expect(error).toMatchObject({ code: '57014' });
      expect(isStoreUnavailable(error)).toBe(true);
      await locked;
      const written = await store.db
        .selectFrom('usage_records')
        .select('request_id')
        .where('request_id', '=', record.requestId)
        .execute();
      expect(written).toEqual([]);
    } finally {
      await blocker.close();
      await database.drop();
    }
  });

  test("a query an operator's statement_timeout cancels is unavailable (a 503)", async () => {
    const database = await createTestDatabase('postgres');
    const store = openStore(database.url, { poolSize: 1 });
    try {
      await sql`set statement_timeout = 100`.execute(store.db);
      const error = await sql`select pg_sleep(1)`.execute(store.db).catch((caught: unknown) => caught);
      expect(error).toMatchObject({ code: '57014' });
      expect(isStoreUnavailable(error)).toBe(true);
    } finally {
      await store.close();
      await database.drop();
    }
  });
});
