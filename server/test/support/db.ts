import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll } from 'vitest';
import { openStore, type Store, type StoreOptions } from '../../src/store/database.js';
import { migrateToLatest } from '../../src/store/migrate.js';

export type TestDialect = 'sqlite' | 'postgres';

/** SQLite always; PostgreSQL too when DATABASE_URL points at one (CI sets it). */
export const testDialects: TestDialect[] = process.env.DATABASE_URL?.startsWith('postgres')
  ? ['sqlite', 'postgres']
  : ['sqlite'];

/** A database of its own for one test file: a SQLite file, or a fresh PostgreSQL schema; `drop` removes it. */
export interface TestDatabase {
  dialect: TestDialect;
  /** A DATABASE_URL for it (PostgreSQL: with search_path set to the schema). */
  url: string;
  /** Opens a store on it with the migrations applied; closed by `drop`. */
  open(options?: StoreOptions): Promise<Store>;
  drop(): Promise<void>;
}

/**
 * A migrated store of its own for the tests of the enclosing file or describe block: created and
 * handed to `use` before them, dropped after them.
 */
export function withTestStore(dialect: TestDialect, use: (store: Store) => void): void {
  let database: TestDatabase | undefined;
  beforeAll(async () => {
    database = await createTestDatabase(dialect);
    use(await database.open());
  });
  afterAll(() => database?.drop());
}

export async function createTestDatabase(dialect: TestDialect): Promise<TestDatabase> {
  const stores: Store[] = [];
  const closeStores = () => Promise.all(stores.splice(0).map((store) => store.close()));
  const openMigrated = async (url: string, options?: StoreOptions) => {
    const store = openStore(url, options);
    stores.push(store);
    await migrateToLatest(store);
    return store;
  };
  if (dialect === 'sqlite') {
    // A file, as the gateway uses (WAL, fsync, usage records written by the worker thread).
    const directory = mkdtempSync(join(tmpdir(), 'paygate-test-db-'));
    const url = join(directory, 'gateway.sqlite');
    let store: Promise<Store> | undefined;
    return {
      dialect,
      url,
      // One store per database: SQLite's payer locks are the store's, as in one gateway process.
      open: (options) => {
        store ??= openMigrated(url, options);
        return store;
      },
      drop: async () => {
        await closeStores();
        rmSync(directory, { recursive: true, force: true });
      },
    };
  }
  const base = process.env.DATABASE_URL;
  if (!base) throw new Error('DATABASE_URL is not set');
  const schema = `test_${randomBytes(6).toString('hex')}`;
  await adminQuery(base, `create schema ${schema}`);
  const url = new URL(base);
  url.searchParams.set('options', `-c search_path=${schema}`);
  return {
    dialect,
    url: url.toString(),
    open: (options) => openMigrated(url.toString(), options),
    drop: async () => {
      await closeStores();
      await adminQuery(base, `drop schema ${schema} cascade`);
    },
  };
}

async function adminQuery(url: string, statement: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(statement);
  } finally {
    await client.end();
  }
}
