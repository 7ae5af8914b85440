import { ConfigError, loadDatabaseUrl } from '../config.js';
import { openStore } from './database.js';
import { migrateToLatest } from './migrate.js';

/** `npm run migrate`: applies pending migrations to DATABASE_URL and exits. */
async function migrate(): Promise<void> {
  const databaseUrl = loadDatabaseUrl();
  // Not under a gateway running on a SQLite file: its code would meet a schema it does not know.
  // Without a query timeout (none unless asked): a migration may build an index for minutes.
  const store = openStore(databaseUrl, { exclusive: true });
  try {
    const applied = await migrateToLatest(store);
    console.log(applied.length === 0 ? 'database is up to date' : `applied: ${applied.join(', ')}`);
  } finally {
    await store.close();
  }
}

migrate().catch((error: unknown) => {
  console.error(error instanceof ConfigError ? error.message : (error as Error).message);
  process.exitCode = 1;
});
