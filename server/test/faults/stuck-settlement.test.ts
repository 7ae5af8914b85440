import { setTimeout as sleep } from 'node:timers/promises';
import { type Hex, parseGwei } from 'viem';
import { expect, test, vi } from 'vitest';
import { type Settlement, settlementsOf } from '../../src/billing/settlements.js';
import { sampleValue, scrapeMetrics } from '../observability/prometheus-text.js';
import { FAULT_LIMITS, type Payer, SMALL_COST, useFaultStack } from './harness.js';

// The chain's fees rise past what a settlement's transaction offers while it waits in the pool:
// the gateway replaces it (same nonce, the market's fees) and whichever is mined pays, once.
const stack = useFaultStack();

/**
 * The payer's next request is forwarded once its settlement, replaced, is mined: one payment, by the
 * replacement, the replaced transaction kept on the settlement; the ledger matches the chain.
 */
async function servedAfterReplacing(payer: Payer, replaced: Hex): Promise<Settlement> {
  const served = await stack.probe.chat(payer.client(), payer.address);
  expect(served.status).toBe(200);
  const [settlement] = await settlementsOf(stack.store, payer.address);
  expect(settlement).toMatchObject({
    status: 'confirmed',
    amountAtomic: SMALL_COST,
    replacedTxHashes: [replaced],
  });
  expect(settlement?.txHash).not.toBe(replaced);
  expect(stack.probe.violations).toEqual([]);
  await stack.expectLedgerMatchesChain([payer.address]);
  return settlement as Settlement;
}

/** The payer's settlement once recorded as sent and then broadcast: in the pool once the node counts it. */
function sentAndPooled(payer: Payer): Promise<Settlement & { txHash: Hex }> {
  return vi.waitFor(
    async () => {
      const [settlement] = await settlementsOf(stack.store, payer.address);
      expect(settlement?.status).toBe('sent');
      expect((await stack.local.testClient.getTxpoolStatus()).pending).toBe(1);
      return settlement as Settlement & { txHash: Hex };
    },
    { timeout: 10_000, interval: 20 },
  );
}

/** Transactions wait in the node's pool until blocks come again. */
async function pauseMining() {
  await stack.local.testClient.setAutomine(false);
  await stack.local.testClient.setIntervalMining({ interval: 0 });
}

test('fees rise past a settlement waiting in the pool: it is replaced at the market fee and pays once', async () => {
  const { local, probe } = stack;
  const payer = await stack.owingPayer(0);
  const forwarded = probe.forwarded();
  // No block until the transaction is in the pool, so that no block can take it at its own fee.
  await pauseMining();
  const waiting = probe.chat(payer.client(), payer.address);
  const stuck = await sentAndPooled(payer);
  // Blocks come again, at a base fee far above its max fee (it would take a minute to fall back).
  await local.testClient.setNextBlockBaseFeePerGas({ baseFeePerGas: parseGwei('1000') });
  await local.testClient.setIntervalMining({ interval: 1 });
  // Not confirmed yet, still able to pay the debt: the 503 states no amount owed.
  const refused = await waiting;
  expect(refused).toMatchObject({ status: 503, code: 'payments_unavailable' });
  expect(refused.details).toBeUndefined();
  expect(probe.forwarded()).toBe(forwarded);

  // The payer's next request finds it still waiting after a receipt timeout: replaced, mined, paid.
  const settlement = await servedAfterReplacing(payer, stuck.txHash);
  const mined = await local.publicClient.getTransaction({ hash: settlement.txHash as Hex });
  const block = await local.publicClient.getBlock({ blockNumber: mined.blockNumber as bigint });
  expect(mined.maxFeePerGas).toBeGreaterThanOrEqual(block.baseFeePerGas as bigint);
  await expect(local.publicClient.getTransactionReceipt({ hash: stuck.txHash })).rejects.toThrow(
    /not be found/,
  );
  expect(probe.violations).toEqual([]);
  await stack.expectLedgerMatchesChain([payer.address]);

  const metrics = await scrapeMetrics(stack.gateway.url);
  expect(sampleValue(metrics, 'paygate_settlement_replacements_total', { rail: 'session' })).toBe(1);
});

test('the node refuses the settlement below its base fee: after a receipt timeout it is sent at the market fee, once', async () => {
  const { local, probe, rpc } = stack;
  const payer = await stack.owingPayer(1);
  const forwarded = probe.forwarded();
  await pauseMining();
  // The broadcast is held on its way while the base fee jumps: the node refuses it on arrival.
  const broadcast = rpc.stallFrom('eth_sendRawTransaction');
  const request = probe.chat(payer.client(), payer.address);
  await broadcast;
  await local.testClient.setNextBlockBaseFeePerGas({ baseFeePerGas: parseGwei('10000') });
  await local.testClient.setIntervalMining({ interval: 1 });
  rpc.pass();
  expect(await request).toMatchObject({ status: 503, code: 'payments_unavailable' });
  expect(probe.forwarded()).toBe(forwarded);
  const [refused] = await settlementsOf(stack.store, payer.address);
  expect(refused?.status).toBe('sent');

  // Once it waited a receipt timeout, the payer's next request replaces it; it is mined and pays.
  await sleep((refused?.updatedAt.getTime() ?? 0) + FAULT_LIMITS.settlementTimeoutMs! - Date.now());
  await servedAfterReplacing(payer, refused?.txHash as Hex);
});

test('a deployment stuck below the market is replaced, not queued behind: the account is deployed and pays once', async () => {
  const { local, probe, rpc } = stack;
  const payer = await stack.owingPayer(2, { deployed: false });
  const forwarded = probe.forwarded();
  await pauseMining();
  // The gateway deploys the account before its first settlement: that transaction waits in the pool.
  const request = probe.chat(payer.client(), payer.address);
  await vi.waitFor(async () => expect((await local.testClient.getTxpoolStatus()).pending).toBe(1), {
    timeout: 10_000,
    interval: 20,
  });
  await local.testClient.setNextBlockBaseFeePerGas({ baseFeePerGas: parseGwei('100000') });
  await local.testClient.setIntervalMining({ interval: 1 });
  expect(await request).toMatchObject({ status: 503, code: 'payments_unavailable' });
  expect(probe.forwarded()).toBe(forwarded);
  expect(await local.publicClient.getCode({ address: payer.address })).toBeUndefined();

  const sends = () => rpc.methods.filter((method) => method === 'eth_sendRawTransaction').length;
  const sendsBefore = sends();
  const served = await probe.chat(payer.client(), payer.address);
  expect(served.status).toBe(200);
  expect(await local.publicClient.getCode({ address: payer.address })).toBeTruthy();
  // The deployment's replacement, then the settlement. (anvil leaves a transaction below the base
  // fee out of its pending count, so there a second deployment would take the same nonce too; the
  // relayer test shows that none is sent.)
  expect(sends()).toBe(sendsBefore + 2);
  expect(await stack.settlementStates(payer.address)).toEqual([
    `confirmed ${SMALL_COST}`,
    `failed ${SMALL_COST}`,
  ]);
  expect(probe.violations).toEqual([]);
  await stack.expectLedgerMatchesChain([payer.address]);
});

test('a node asking a larger raise than an eighth refuses the replacement: it is raised again, mined, and pays once', async () => {
  const { local, probe, rpc } = stack;
  // As geth with --txpool.pricebump=25: an eighth more is refused, two eighths (26.6%) are taken.
  rpc.requirePriceBump(25);
  const payer = await stack.owingPayer(3);
  await pauseMining();
  const waiting = probe.chat(payer.client(), payer.address);
  const stuck = await sentAndPooled(payer);
  const offered = await local.publicClient.getTransaction({ hash: stuck.txHash });
  await local.testClient.setNextBlockBaseFeePerGas({ baseFeePerGas: (offered.maxFeePerGas as bigint) * 10n });
  await local.testClient.setIntervalMining({ interval: 1 });
  expect(await waiting).toMatchObject({ status: 503, code: 'payments_unavailable' });

  await sleep(stuck.updatedAt.getTime() + FAULT_LIMITS.settlementTimeoutMs! - Date.now());
  const served = await probe.chat(payer.client(), payer.address);
  expect(served.status).toBe(200);
  const [settlement] = await settlementsOf(stack.store, payer.address);
  // The refused replacement stays on the settlement (recorded before its broadcast); the second is mined.
  expect(settlement).toMatchObject({ status: 'confirmed', amountAtomic: SMALL_COST });
  expect(settlement?.replacedTxHashes).toHaveLength(2);
  expect(settlement?.replacedTxHashes[0]).toBe(stuck.txHash);
  const mined = await local.publicClient.getTransaction({ hash: settlement?.txHash as Hex });
  expect(mined.maxPriorityFeePerGas! * 100n).toBeGreaterThanOrEqual(offered.maxPriorityFeePerGas! * 125n);
  expect(probe.violations).toEqual([]);
  await stack.expectLedgerMatchesChain([payer.address]);
});
