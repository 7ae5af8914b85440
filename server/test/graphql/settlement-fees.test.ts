import type { FastifyInstance } from 'fastify';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { buildApp } from '../../src/app.js';
import { recordUsage } from '../../src/billing/ledger.js';
import { confirmSettlement, markSettlementSent, openSettlement } from '../../src/billing/settlements.js';
import type { Store } from '../../src/store/database.js';
import { testConfig } from '../support/config.js';
import { createTestDatabase, type TestDatabase, testDialects } from '../support/db.js';

const ADMIN_TOKEN = 'operator-token-for-tests-0123';
// 300,000 gas at 100,000 gwei: 30 ETH, past what int8 holds in wei (9.2 ETH).
const SPIKE_FEE_WEI = 30_000_000_000_000_000_123n;

async function settledAtSpikeFee(store: Store, requestId: string): Promise<void> {
  const payer = privateKeyToAddress(generatePrivateKey());
  await recordUsage(store, {
    requestId,
    payer,
    rail: 'session',
    model: 'anthropic/claude-sonnet-5.5',
    usage: {
      inputTokens: 10,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
      outputTokens: 2,
      reasoningTokens: 0,
      exact: true,
    },
    cost: { providerPicoUsd: 60_000_000n, commissionPicoUsd: 6_000_000n, totalPicoUsd: 66_000_000n },
  });
  const opened = await openSettlement(store, payer, 'session');
  const txHash = `0x${requestId.padStart(64, '0')}` as const;
  await markSettlementSent(store, opened!.id, txHash);
  await confirmSettlement(store, opened!.id, { txHash, gasUsed: 300_000n, feeWei: SPIKE_FEE_WEI });
}

describe.each(testDialects)('settlement fees beyond int8 in wei, on %s', (dialect) => {
  let database: TestDatabase;
  let store: Store;
  let app: FastifyInstance;

  beforeAll(async () => {
    database = await createTestDatabase(dialect);
    store = await database.open();
    app = await buildApp(
      testConfig({ adminToken: ADMIN_TOKEN, databaseUrl: database.url }),
      dialect === 'sqlite' ? { store } : {},
    );
    await settledAtSpikeFee(store, 'a1');
    await settledAtSpikeFee(store, 'b2');
  });
  afterAll(async () => {
    await app?.close();
    await database.drop();
  });

  test('are confirmed and kept exactly, and summed exactly by day', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/graphql',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      payload: { query: '{ operator { economics { settlements gasUsed gasSpentWei gasSpentEth } } }' },
    });
    expect(res.json()).toEqual({
      data: {
        operator: {
          economics: [
            {
              settlements: 2,
              gasUsed: '600000',
              gasSpentWei: (2n * SPIKE_FEE_WEI).toString(),
              gasSpentEth: '60.000000000000000246',
            },
          ],
        },
      },
    });
  });
});
