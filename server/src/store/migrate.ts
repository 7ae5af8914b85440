import { Migrator, sql } from 'kysely';
import { isPostgresUrl, openStore, type Store } from './database.js';
import { migrations } from './migrations/index.js';

/** Applies every pending migration (safe when several instances start at once); returns the names applied. */
export async function migrateToLatest(store: Store): Promise<string[]> {
  const migrator = new Migrator({
    db: store.db,
    provider: { getMigrations: async () => migrations },
    // Kysely looks for its own tables in every schema unless told which: another schema's (another
    // deployment's, another app's) would be taken for this one's, and migrating would fail.
    migrationTableSchema: store.dialect === 'postgres' ? await currentSchema(store) : undefined,
  });
  const { error, results = [] } = await migrator.migrateToLatest();
  if (error) {
    const failed = results.find((result) => result.status === 'Error');
    throw new Error(`migration ${failed?.migrationName ?? '(unknown)'} failed: ${(error as Error).message}`, {
      cause: error,
    });
  }
  return results.map((result) => result.migrationName);
}

/**
 * Migrates the database `databaseUrl` names. PostgreSQL's on connections of its own without the
 * query timeout: a migration may build an index over a large table for minutes. (A SQLite file is
 * the store's own: `:memory:` would be another database.)
 */
export async function migrateDatabase(databaseUrl: string, store: Store): Promise<string[]> {
  if (!isPostgresUrl(databaseUrl)) return migrateToLatest(store);
  const migrating = openStore(databaseUrl, { queryTimeoutMs: 0, poolSize: 1, lockPoolSize: 1 });
  try {
    return await migrateToLatest(migrating);
  } finally {
    await migrating.close();
  }
}

async function currentSchema(store: Store): Promise<string> {
  const { rows } = await sql<{ schema: string }>`select current_schema() as schema`.execute(store.db);
  const schema = rows[0]?.schema;
  if (!schema) throw new Error('the database has no current schema: set search_path to an existing schema');
  return schema;
}
