import { type Kysely, Migrator, sql } from 'kysely';
import type { Store } from './database.js';
import { migrations } from './migrations/index.js';
import type { Database } from './schema.js';

/** Applies every pending migration (safe when several instances start at once); returns the names applied. */
export async function migrateToLatest(store: Store): Promise<string[]> {
  if (store.dialect !== 'postgres') return migrate(store.db, undefined);
  const schema = await currentSchema(store);
  // On one connection without the statement timeout: a migration over a large table, or the wait
  // for another instance's migration, may take longer than any query the gateway serves.
  return store.db.connection().execute(async (db) => {
    await sql`set statement_timeout = 0`.execute(db);
    try {
      return await migrate(db, schema);
    } finally {
      await sql`reset statement_timeout`.execute(db);
    }
  });
}

async function migrate(db: Kysely<Database>, schema: string | undefined): Promise<string[]> {
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => migrations },
    // Kysely looks for its own tables in every schema unless told which: another schema's (another
    // deployment's, another app's) would be taken for this one's, and migrating would fail.
    migrationTableSchema: schema,
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

async function currentSchema(store: Store): Promise<string> {
  const { rows } = await sql<{ schema: string }>`select current_schema() as schema`.execute(store.db);
  const schema = rows[0]?.schema;
  if (!schema) throw new Error('the database has no current schema: set search_path to an existing schema');
  return schema;
}
