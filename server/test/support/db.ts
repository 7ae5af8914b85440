import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { openStore, type Store, type StoreOptions } from '../../src/store/database.js';
import { migrateToLatest } from '../../src/store/migrate.js';

export type TestDialect = 'sqlite' | 'postgres';

/** SQLite always; PostgreSQL too when DATABASE_URL points at one (CI sets it). */
export const testDialects: TestDialect[] = process.env.DATABASE_URL?.startsWith('postgres')
  ? ['sqlite', 'postgres']
  : ['sqlite'];

/** A database of its own for one test file: `:memory:`, or a fresh PostgreSQL schema dropped by `drop`. */
export interface TestDatabase {
  dialect: TestDialect;
  /** A DATABASE_URL for it (PostgreSQL: with search_path set to the schema). */
  url: string;
  /** Opens a store on it with the migrations applied; closed by `drop`. */
  open(options?: StoreOptions): Promise<Store>;
  drop(): Promise<void>;
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
    let memory: Store | undefined;
    return {
      dialect,
      url: ':memory:',
      // One in-memory database per file: every open() returns the same store.
      open: async () => {
        memory ??= await openMigrated(':memory:');
        return memory;
      },
      drop: async () => {
        await closeStores();
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
