import { sql } from 'kysely';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { describe, expect, test } from 'vitest';
import { debtOf, findUsageRecord, recordUsages, UsageConflictError } from '../../src/billing/ledger.js';
import { collectableDebtors, openSettlement, settlementsOf } from '../../src/billing/settlements.js';
import { createUsageRecorder } from '../../src/billing/usage-recorder.js';
import type { Store } from '../../src/store/database.js';
import { testCatalog } from '../support/catalog.js';
import { testDialects, withTestStore } from '../support/db.js';

/**
 * The hot path of a payer that owes nothing (free models, or everything settled): no settlement is
 * opened, and records costing 0 are not a debt. And the usage recorder's group commit: records of
 * requests ending together share one transaction, each still stored exactly.
 */
const newPayer = () => privateKeyToAddress(generatePrivateKey());
const usage = {
  inputTokens: 3,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  outputTokens: 2,
  reasoningTokens: 0,
  exact: true,
};
let sequence = 0;
const entry = (payer: `0x${string}`, totalPicoUsd: bigint, createdAt?: Date) => ({
  requestId: `owed-${++sequence}`,
  payer,
  rail: 'session' as const,
  model: 'anthropic/claude-sonnet-4.5',
  usage,
  cost: { providerPicoUsd: totalPicoUsd, commissionPicoUsd: 0n, totalPicoUsd },
  createdAt,
});

describe.each(testDialects)('nothing owed, on %s', (dialect) => {
  let store: Store;
  withTestStore(dialect, (opened) => {
    store = opened;
  });

  test("a settlement's records are found through an index that holds claimed records only", async () => {
    const plan =
      dialect === 'sqlite'
        ? (
            await sql<{
              detail: string;
            }>`explain query plan select request_id from usage_records where settlement_id = 'x'`.execute(
              store.db,
            )
          ).rows.map((row) => row.detail)
        : await store.db.transaction().execute(async (trx) => {
            // A table this small is read whole anyway: asked whether the index can serve the query at all.
            await sql`set local enable_seqscan = off`.execute(trx);
            const rows = await sql<{
              'QUERY PLAN': string;
            }>`explain select request_id from usage_records where settlement_id = 'x'`.execute(trx);
            return rows.rows.map((row) => row['QUERY PLAN']);
          });
    expect(plan.join('\n')).toContain('usage_records_settlement');
    const definition =
      dialect === 'sqlite'
        ? await sql<{
            text: string;
          }>`select sql as text from sqlite_master where name = 'usage_records_settlement'`.execute(store.db)
        : await sql<{
            text: string;
          }>`select indexdef as text from pg_indexes where indexname = 'usage_records_settlement' and schemaname = current_schema()`.execute(
            store.db,
          );
    expect(definition.rows[0]?.text.toLowerCase().replace(/[()]/g, '')).toContain(
      'where settlement_id is not null',
    );
  });

  test('records costing 0 open no settlement, owe nothing and make no idle debtor', async () => {
    const payer = newPayer();
    const longAgo = new Date(Date.now() - 3_600_000);
    await recordUsages(store, [entry(payer, 0n, longAgo), entry(payer, 0n, longAgo)]);
    expect(await openSettlement(store, payer, 'session')).toBeNull();
    expect(await settlementsOf(store, payer)).toEqual([]);
    expect(await debtOf(store, payer)).toMatchObject({ unpaidPicoUsd: 0n, owedAtomic: 0n });
    expect(await collectableDebtors(store, { idleMs: 60_000, sessionsEndingWithinMs: 60_000 })).not.toContain(
      payer,
    );
  });

  test('they are claimed, and paid for nothing, with the payer next paid records', async () => {
    const payer = newPayer();
    const [free] = await recordUsages(store, [entry(payer, 0n)]);
    await recordUsages(store, [entry(payer, 2_500_000n)]);
    const settlement = await openSettlement(store, payer, 'session');
    expect(settlement).toMatchObject({ amountAtomic: 3n, recordsTotalPicoUsd: 2_500_000n, recordCount: 2 });
    expect((await findUsageRecord(store, (free as { requestId: string }).requestId))?.settlementId).toBe(
      settlement?.id,
    );
  });

  test('a payer with many settlements behind it still finds nothing owed', async () => {
    const payer = newPayer();
    for (let i = 0; i < 20; i++) {
      await recordUsages(store, [entry(payer, 1_000_000n)]);
      const opened = await openSettlement(store, payer, 'session');
      expect(opened?.amountAtomic).toBe(1n);
      await store.db
        .updateTable('settlements')
        .set({ status: 'confirmed', confirmed_at: Date.now() })
        .where('id', '=', opened!.id)
        .execute();
    }
    expect(await openSettlement(store, payer, 'session')).toBeNull();
    expect(await settlementsOf(store, payer, { limit: 100 })).toHaveLength(20);
  });

  test('records written together: each stored exactly, a conflicting request id refused alone', async () => {
    const payer = newPayer();
    const first = entry(payer, 7n);
    await recordUsages(store, [first]);
    const batch = [
      entry(payer, 1n),
      { ...first, cost: { ...first.cost, totalPicoUsd: 8n, providerPicoUsd: 8n } },
      first,
      entry(newPayer(), 3n),
    ];
    const results = await recordUsages(store, batch);
    expect(results[0]).toMatchObject({ requestId: batch[0]?.requestId, cost: { totalPicoUsd: 1n } });
    expect(results[1]).toBeInstanceOf(UsageConflictError);
    // The same record again is idempotent.
    expect(results[2]).toMatchObject({ requestId: first.requestId, cost: { totalPicoUsd: 7n } });
    expect(results[3]).toMatchObject({ cost: { totalPicoUsd: 3n } });
    expect((await findUsageRecord(store, first.requestId))?.cost.totalPicoUsd).toBe(7n);
  });

  test('a new request id twice in one batch: the first entry is stored, a different second one refused', async () => {
    const payer = newPayer();
    const fresh = entry(payer, 5n);
    const results = await recordUsages(store, [
      fresh,
      fresh,
      { ...fresh, cost: { ...fresh.cost, totalPicoUsd: 6n, providerPicoUsd: 6n } },
    ]);
    expect(results[0]).toMatchObject({ requestId: fresh.requestId, cost: { totalPicoUsd: 5n } });
    expect(results[1]).toEqual(results[0]);
    expect(results[2]).toBeInstanceOf(UsageConflictError);
    expect(await findUsageRecord(store, fresh.requestId)).toEqual(results[0]);
  });

  test('the recorder answers every concurrent request once its own record is committed', async () => {
    const recorder = createUsageRecorder(store, 1000);
    const model = testCatalog().find('anthropic/claude-sonnet-4.5')!;
    const payers = Array.from({ length: 5 }, newPayer);
    const requests = Array.from({ length: 60 }, (_, i) => ({
      requestId: `group-${++sequence}`,
      payer: payers[i % payers.length] as `0x${string}`,
      rail: 'session' as const,
      model,
      usage: { ...usage, inputTokens: i + 1 },
    }));
    const costs = await Promise.all(requests.map((request) => recorder.record(request)));
    for (const [i, request] of requests.entries()) {
      const stored = await findUsageRecord(store, request.requestId);
      expect(stored?.usage.inputTokens).toBe(i + 1);
      expect(stored?.cost.totalPicoUsd.toString()).toBe(costs[i]?.totalPicoUsd);
    }
    // One request id used twice with different usage: that one request fails, the others are served.
    const again = recorder.record({ ...requests[0]!, usage: { ...usage, inputTokens: 999 } });
    const fresh = recorder.record({ ...requests[1]!, requestId: `group-${++sequence}` });
    await expect(again).rejects.toBeInstanceOf(UsageConflictError);
    await expect(fresh).resolves.toMatchObject({ totalPicoUsd: expect.any(String) });
  });
});
