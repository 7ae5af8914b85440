import { sql } from 'kysely';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { debtOf, recordUsage } from '../../src/billing/ledger.js';
import {
  confirmSettlement,
  openSettlement,
  SettlementInProgressError,
  settlementsOf,
} from '../../src/billing/settlements.js';
import type { Store } from '../../src/store/database.js';
import { PayerLockTimeoutError } from '../../src/store/payer-lock.js';
import { createTestDatabase, type TestDatabase, testDialects } from '../support/db.js';

const usage = {
  inputTokens: 1,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  outputTokens: 1,
  reasoningTokens: 0,
  exact: true,
};
let sequence = 0;
const txHash = () => `0x${(++sequence).toString(16).padStart(64, '0')}` as const;

/**
 * Two stores on one database stand for two gateway instances. SQLite is one process's file, so
 * there both "instances" share one store (its single connection is what serializes them).
 */
describe.each(testDialects)('concurrency on %s', (dialect) => {
  let database: TestDatabase;
  let instances: [Store, Store];
  beforeAll(async () => {
    database = await createTestDatabase(dialect);
    const first = await database.open();
    instances = [first, dialect === 'postgres' ? await database.open() : first];
  });
  afterAll(() => database.drop());

  test('concurrent writers and settlers never claim a record twice, and every record ends paid', async () => {
    const payers = [0, 1, 2].map(() => privateKeyToAddress(generatePrivateKey()));
    const costs = new Map<string, bigint>();
    const write = async (n: number) => {
      const requestId = `conc-${dialect}-${n}`;
      const total = BigInt(n * 37_373 + 1);
      costs.set(requestId, total);
      await recordUsage(instances[n % 2]!, {
        requestId,
        payer: payers[n % payers.length]!,
        rail: 'session',
        model: 'm',
        usage,
        cost: { providerPicoUsd: total, commissionPicoUsd: 0n, totalPicoUsd: total },
      });
    };
    const settle = async (store: Store, payer: `0x${string}`) => {
      for (let round = 0; round < 12; round++) {
        try {
          const opened = await openSettlement(store, payer, 'session');
          if (opened) await confirmSettlement(store, opened.id, { txHash: txHash() });
        } catch (error) {
          // The other instance's settlement of this payer is in flight: its turn.
          if (!(error instanceof SettlementInProgressError)) throw error;
        }
      }
    };
    await Promise.all([
      ...Array.from({ length: 240 }, (_, n) => write(n)),
      ...payers.flatMap((payer) => instances.map((store) => settle(store, payer))),
    ]);
    for (const payer of payers) {
      const last = await openSettlement(instances[0], payer, 'session');
      if (last) await confirmSettlement(instances[0], last.id, { txHash: txHash() });
    }

    const db = instances[0].db;
    const records = await db
      .selectFrom('usage_records')
      .selectAll()
      .where('request_id', 'like', `conc-${dialect}-%`)
      .execute();
    expect(records).toHaveLength(240);
    for (const payer of payers) {
      const mine = records.filter((r) => r.payer === payer);
      const settlements = await settlementsOf(instances[0], payer, { limit: 1000 });
      expect(settlements.every((s) => s.status === 'confirmed')).toBe(true);
      for (const settlement of settlements) {
        const claimed = mine.filter((r) => r.settlement_id === settlement.id);
        expect(claimed.reduce((sum, r) => sum + r.total_pico, 0n)).toBe(settlement.recordsTotalPicoUsd);
        expect(claimed).toHaveLength(settlement.recordCount);
      }
      // Every record is in exactly one settlement: the settlements' totals add up to the records' once.
      const recordsTotal = mine.reduce((sum, r) => sum + costs.get(r.request_id)!, 0n);
      expect(settlements.reduce((sum, s) => sum + s.recordsTotalPicoUsd, 0n)).toBe(recordsTotal);
      const settled = settlements.reduce((sum, s) => sum + s.amountAtomic, 0n);
      const debt = await debtOf(instances[1], payer);
      expect(debt.unpaidPicoUsd).toBe(0n);
      expect(settled * 1_000_000n - debt.creditPicoUsd).toBe(recordsTotal);
    }
  });

  test('the payer lock admits one holder of a payer at a time, across instances', async () => {
    const payer = privateKeyToAddress(generatePrivateKey());
    let inside = 0;
    let most = 0;
    let done = 0;
    await Promise.all(
      Array.from({ length: 16 }, (_, n) =>
        instances[n % 2]!.withPayerLock(payer, async () => {
          inside++;
          most = Math.max(most, inside);
          for (let i = 0; i < 3; i++) await sql`select 1`.execute(instances[n % 2]!.db);
          inside--;
          done++;
        }),
      ),
    );
    expect(done).toBe(16);
    expect(most).toBe(1);
  });

  test('holding one payer does not block another', async () => {
    const [a, b] = [0, 1].map(() => privateKeyToAddress(generatePrivateKey()));
    const result = await instances[0].withPayerLock(a!, () =>
      instances[1].withPayerLock(b!, async () => 'both held'),
    );
    expect(result).toBe('both held');
  });

  test('a failing holder releases the lock', async () => {
    const payer = privateKeyToAddress(generatePrivateKey());
    await expect(
      instances[0].withPayerLock(payer, async () => {
        throw new Error('settlement failed');
      }),
    ).rejects.toThrow('settlement failed');
    expect(await instances[1].withPayerLock(payer, async () => 'free again')).toBe('free again');
  });

  test.runIf(dialect === 'postgres')(
    'an instance gives up on a payer another instance holds too long',
    async () => {
      const impatient = await database.open({ lockTimeoutMs: 50 });
      const payer = privateKeyToAddress(generatePrivateKey());
      const outcome = await instances[0].withPayerLock(payer, () =>
        impatient.withPayerLock(payer, async () => 'acquired').catch((error: unknown) => error),
      );
      expect(outcome).toBeInstanceOf(PayerLockTimeoutError);
      expect(await impatient.withPayerLock(payer, async () => 'acquired')).toBe('acquired');
    },
  );
});
