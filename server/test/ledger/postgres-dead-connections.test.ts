import { sql } from 'kysely';
import { describe, expect, test } from 'vitest';
import { isStoreUnavailable, openStore } from '../../src/store/database.js';
import { startTcpProxy, throughProxy } from '../faults/tcp-proxy.js';
import { createTestDatabase, testDialects } from '../support/db.js';

describe.runIf(testDialects.includes('postgres'))(
  'PostgreSQL connections a silent network left waiting',
  () => {
    test('a query that timed out takes its connection out of use: the query waiting for it gets a fresh one', async () => {
      const database = await createTestDatabase('postgres');
      const target = new URL(database.url);
      const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
      const store = openStore(throughProxy(database.url, proxy), { poolSize: 1, queryTimeoutMs: 300 });
      try {
        await sql`select 1`.execute(store.db);
        proxy.stall();
        const first = sql`select 1`.execute(store.db).catch((error: unknown) => error);
        // Waits for the pool's only connection, which the first query holds.
        const second = sql<{ answer: number }>`select 42 as answer`.execute(store.db);
        setTimeout(() => proxy.restore(), 1_000);
        expect(await first).toMatchObject({ message: 'Query read timeout' });
        expect((await second).rows).toEqual([{ answer: 42 }]);
      } finally {
        await store.close();
        await proxy.close();
        await database.drop();
      }
    }, 20_000);

    test('a transaction whose query timed out fails as unavailable (a 503 the client retries), not as a bug', async () => {
      const database = await createTestDatabase('postgres');
      const target = new URL(database.url);
      const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
      const store = openStore(throughProxy(database.url, proxy), { poolSize: 1, queryTimeoutMs: 300 });
      try {
        const failed = await store.db
          .transaction()
          .execute(async (trx) => {
            await sql`select 1`.execute(trx);
            proxy.stall();
            await sql`select 2`.execute(trx);
          })
          .catch((error: unknown) => error);
        // The rollback finds the connection closed: that error, not the timeout, is what surfaces.
        expect(isStoreUnavailable(failed)).toBe(true);
      } finally {
        await store.close();
        await proxy.close();
        await database.drop();
      }
    }, 20_000);
  },
);
