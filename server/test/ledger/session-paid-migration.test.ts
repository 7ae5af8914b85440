import { type Kysely, Migrator, sql } from 'kysely';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { afterEach, describe, expect, test } from 'vitest';
import { openStore, type Store } from '../../src/store/database.js';
import { migrateToLatest } from '../../src/store/migrate.js';
import { migrations } from '../../src/store/migrations/index.js';
import { createTestDatabase, type TestDatabase, testDialects } from '../support/db.js';

/**
 * Migration 0011 starts each stored session's running total from what admission counted until then:
 * its payer's confirmed session-rail settlements opened since the session was stored.
 */
describe.each(testDialects)('the running totals of sessions stored before them, on %s', (dialect) => {
  let database: TestDatabase | undefined;
  let store: Store | undefined;
  afterEach(async () => {
    await store?.close();
    await database?.drop();
  });

  test('start from the confirmed session-rail settlements since each session', async () => {
    database = await createTestDatabase(dialect);
    store = openStore(database.url);
    const schema =
      dialect === 'postgres'
        ? (await sql<{ schema: string }>`select current_schema() as schema`.execute(store.db)).rows[0]?.schema
        : undefined;
    const before = Object.fromEntries(Object.entries(migrations).filter(([name]) => name < '0011'));
    const migrated = await new Migrator({
      db: store.db,
      provider: { getMigrations: async () => before },
      migrationTableSchema: schema,
    }).migrateToLatest();
    expect(migrated.error).toBeUndefined();

    const db = store.db as unknown as Kysely<unknown>;
    const payer = privateKeyToAddress(generatePrivateKey());
    await sql`insert into payers (wallet, credit_pico, created_at) values (${payer}, 0, 0)`.execute(db);
    const session = (id: string, createdAt: number) =>
      sql`insert into sessions (id, wallet, delegation, delegation_hash, signature, limits, expires_at, created_at)
        values (${id}, ${payer}, '{}', ${`0x${id}`}, '0x', '{}', ${Date.now() + 3_600_000}, ${createdAt})`.execute(
        db,
      );
    await session('old', 1_000);
    await session('new', 3_000);
    const settlement = (id: string, rail: string, status: string, amount: number, createdAt: number) =>
      sql`insert into settlements (id, payer, rail, status, amount_atomic, records_total_pico, record_count,
          credit_before_pico, carried_pico, created_at, updated_at)
        values (${id}, ${payer}, ${rail}, ${status}, ${amount}, 0, 0, 0, 0, ${createdAt}, ${createdAt})`.execute(
        db,
      );
    await settlement('s1', 'session', 'confirmed', 5, 2_000);
    await settlement('s2', 'session', 'confirmed', 7, 4_000);
    await settlement('s3', 'x402', 'confirmed', 100, 4_001);
    await settlement('s4', 'session', 'failed', 1_000, 4_002);
    await settlement('s5', 'session', 'pending', 10_000, 4_003);

    await migrateToLatest(store);
    const totals = await store.db
      .selectFrom('sessions')
      .select(['id', 'paid_atomic', 'period_paid_atomic', 'paid_period'])
      .orderBy('id')
      .execute();
    expect(totals).toEqual([
      { id: 'new', paid_atomic: 7n, period_paid_atomic: 0n, paid_period: null },
      { id: 'old', paid_atomic: 12n, period_paid_atomic: 0n, paid_period: null },
    ]);
    const ids = await store.db.selectFrom('settlements').select('session_id').execute();
    expect(ids.every((row) => row.session_id === null)).toBe(true);
  });
});
