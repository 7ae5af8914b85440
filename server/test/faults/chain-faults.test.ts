import { randomBytes } from 'node:crypto';
import { type Address, encodeFunctionData, erc20Abi, getAddress, type Hex, toHex } from 'viem';
import { expect, test } from 'vitest';
import { mintUsdc, usdcBalance } from '../../devkit/chain/index.js';
import { settlementsOf } from '../../src/billing/settlements.js';
import { sampleValue, scrapeMetrics } from '../observability/prometheus-text.js';
import { PAYER_FUNDS, SMALL_COST, SMALL_USAGE, useFaultStack } from './harness.js';

/** Each RPC call's delay in the slow-node case: well within the gateway's timeouts (10 s a call, 3 s a receipt). */
const RPC_DELAY_MS = 250;

// The chain's RPC fails at each step of a settlement while a gateway process settles a payer's
// debt: before anything is sent, right after the broadcast, and on the broadcast itself.
const stack = useFaultStack();

test('RPC down while the debt is settled: 503, nothing forwarded, the debt paid once it is back', async () => {
  const { rpc } = stack;
  const payer = await stack.owingPayer(0);
  const unavailable = async () =>
    sampleValue(await scrapeMetrics(stack.gateway.url), 'paygate_settlements_total', {
      rail: 'session',
      status: 'unavailable',
    }) ?? 0;
  const unavailableBefore = await unavailable();
  const refused = await stack.refusedWhileCut(
    payer,
    { cut: rpc.down, restore: rpc.pass },
    '503 payments_unavailable',
  );
  expect(refused.headers.get('retry-after')).not.toBeNull();
  // What the payer owes, as every 402 states it.
  expect(refused.details).toEqual({ owedAtomic: SMALL_COST.toString() });
  // The chain could not be reached: the gateway's side, counted as unavailable.
  expect((await unavailable()) - unavailableBefore).toBe(1);

  await stack.servedPayingDebt(payer);
  // The attempt that could not reach the chain released its claim; one payment, not two.
  expect(await stack.settlementStates(payer.address)).toEqual([
    `confirmed ${SMALL_COST}`,
    `failed ${SMALL_COST}`,
  ]);
});

test('RPC stalls right after the broadcast: 503, then the mined payment is recognised, not paid again', async () => {
  const { rpc, probe } = stack;
  const payer = await stack.owingPayer(1);
  const forwarded = probe.forwarded();
  const broadcast = rpc.stallAfter('eth_sendRawTransaction');
  let refused: Awaited<ReturnType<typeof probe.chat>>;
  try {
    refused = await probe.chat(payer.client(), payer.address);
    await broadcast;
  } finally {
    rpc.pass();
  }
  expect(`${refused.status} ${refused.code}`).toBe('503 payments_unavailable');
  // Not what the payer must pay: the transaction sent, not confirmed yet, may pay it all.
  expect(refused.details).toBeUndefined();
  expect(probe.forwarded()).toBe(forwarded);
  // While the node cannot be reached, the settlement in flight cannot be looked up: 503 again.
  rpc.down();
  try {
    const unreachable = await probe.chat(payer.client(), payer.address);
    expect(`${unreachable.status} ${unreachable.code}`).toBe('503 payments_unavailable');
    expect(unreachable.details).toBeUndefined();
  } finally {
    rpc.pass();
  }
  expect(probe.forwarded()).toBe(forwarded);

  const served = await probe.chat(payer.client(), payer.address);
  expect(served.status).toBe(200);
  // Its debt was the stalled settlement's, found mined on chain: nothing new to send.
  expect(served.headers.get('x-settlement-tx')).toBeNull();
  expect(probe.violations).toEqual([]);
  expect(await stack.settlementStates(payer.address)).toEqual([`confirmed ${SMALL_COST}`]);
  await stack.expectLedgerMatchesChain([payer.address]);
});

test('the broadcast is lost on the way: the stored transaction is sent again and pays once', async () => {
  const { rpc, probe } = stack;
  const payer = await stack.owingPayer(2);
  const forwarded = probe.forwarded();
  const sends = () => rpc.methods.filter((method) => method === 'eth_sendRawTransaction').length;
  const sendsBefore = sends();
  const lost = rpc.downFrom('eth_sendRawTransaction');
  let refused: Awaited<ReturnType<typeof probe.chat>>;
  try {
    refused = await probe.chat(payer.client(), payer.address);
    await lost;
  } finally {
    rpc.pass();
  }
  expect(`${refused.status} ${refused.code}`).toBe('503 payments_unavailable');
  // The node may have taken it: no amount to pay is stated.
  expect(refused.details).toBeUndefined();
  expect(probe.forwarded()).toBe(forwarded);
  // Signed and stored before the broadcast: the settlement waits as sent, its records claimed.
  expect(await stack.settlementStates(payer.address)).toEqual([`sent ${SMALL_COST}`]);

  const served = await probe.chat(payer.client(), payer.address);
  expect(served.status).toBe(200);
  expect(sends()).toBeGreaterThan(sendsBefore + 1);
  expect(probe.violations).toEqual([]);
  expect(await stack.settlementStates(payer.address)).toEqual([`confirmed ${SMALL_COST}`]);
  await stack.expectLedgerMatchesChain([payer.address]);
});

test('RPC down at the code check of an account authorized before it existed: 503, a reason without the RPC URL, paid once back', async () => {
  const { rpc } = stack;
  const payer = await stack.owingPayer(3, { deployed: false });
  await stack.refusedWhileCut(
    payer,
    { cut: () => void rpc.downFrom('eth_getCode'), restore: rpc.pass },
    '503 payments_unavailable',
  );
  const [failed] = await settlementsOf(stack.store, payer.address);
  expect(failed?.status).toBe('failed');
  expect(failed?.failureReason).toMatch(/^the chain cannot settle right now/);
  expect(failed?.failureReason).not.toContain('127.0.0.1');

  await stack.servedPayingDebt(payer);
});

test.each([
  ['the node took the settlement but its answer says "nonce too low" (a retried delivery)', 4, false],
  // Behind a load balancer, the node asked next has not seen the transaction yet.
  ['"nonce too low" for a settlement the node took, asked about a node a block behind', 6, true],
])('%s: it is not paid twice', async (_case, owner, lagging) => {
  const { rpc } = stack;
  const payer = await stack.owingPayer(owner);
  const misreported = rpc.misreportNext('eth_sendRawTransaction', 'nonce too low');
  const lagged = lagging ? rpc.lagNext('eth_getTransactionByHash') : undefined;
  const refused = await stack.probe.chat(payer.client(), payer.address);
  await Promise.all([misreported, lagged]);
  expect(`${refused.status} ${refused.code}`).toBe('503 payments_unavailable');

  // The next request finds the transaction mined: that one payment is the settlement.
  const served = await stack.probe.chat(payer.client(), payer.address);
  expect(served.status).toBe(200);
  expect(await stack.settlementStates(payer.address)).toEqual([`confirmed ${SMALL_COST}`]);
  expect(stack.probe.violations).toEqual([]);
  await stack.expectLedgerMatchesChain([payer.address]);
});

test('a settlement mined while the nodes asked for its receipt are a block behind: recognised, not paid again', async () => {
  const { rpc, probe } = stack;
  // Owner 0's key again: a smart account of its own (a new salt), as every owingPayer makes.
  const payer = await stack.owingPayer(0);
  // Sent, then its receipt cannot be read: 503, the settlement left `sent`.
  const down = rpc.downFrom('eth_getTransactionReceipt');
  let refused: Awaited<ReturnType<typeof probe.chat>>;
  try {
    refused = await probe.chat(payer.client(), payer.address);
    await down;
  } finally {
    rpc.pass();
  }
  expect(`${refused.status} ${refused.code}`).toBe('503 payments_unavailable');
  expect(refused.details).toBeUndefined();
  const [sent] = await settlementsOf(stack.store, payer.address);
  await stack.local.publicClient.waitForTransactionReceipt({ hash: sent!.txHash! });
  // The next look finds the nonce used, while two receipt lookups reach a node that has not
  // seen the block: the settlement is not taken for dropped.
  const lagged = rpc.lagNext('eth_getTransactionReceipt', 2);
  const served = await probe.chat(payer.client(), payer.address);
  await lagged;
  expect(served.status).toBe(200);
  expect(served.headers.get('x-settlement-tx')).toBeNull();
  expect(probe.violations).toEqual([]);
  expect(await stack.settlementStates(payer.address)).toEqual([`confirmed ${SMALL_COST}`]);
  await stack.expectLedgerMatchesChain([payer.address]);
});

test('the payer moves its USDC away between the simulation and the broadcast: the revert is a 503, the retry says why', async () => {
  const { rpc, probe, local } = stack;
  const payer = await stack.owingPayer(5);
  const forwarded = probe.forwarded();
  const broadcast = rpc.stallFrom('eth_sendRawTransaction');
  const answer = probe.chat(payer.client(), payer.address);
  try {
    await broadcast;
    await moveAllUsdc(payer.address, getAddress(toHex(randomBytes(20)) as Hex));
  } finally {
    rpc.pass();
  }
  const refused = await answer;
  expect(`${refused.status} ${refused.code}`).toBe('503 payments_unavailable');
  expect(refused.headers.get('retry-after')).not.toBeNull();
  // Reverted, nothing paid: the debt is owed again, and stated.
  expect(refused.details).toEqual({ owedAtomic: SMALL_COST.toString() });
  expect(probe.forwarded()).toBe(forwarded);
  const metrics = await scrapeMetrics(stack.gateway.url);
  expect(sampleValue(metrics, 'paygate_settlements_total', { rail: 'session', status: 'failed' })).toBe(1);

  // The retry simulates again: now the chain says what the payer must fix.
  const told = await probe.chat(payer.client(), payer.address);
  expect(`${told.status} ${told.code}`).toBe('402 payment_required');
  expect(probe.forwarded()).toBe(forwarded);
  const [second, first] = await settlementsOf(stack.store, payer.address);
  expect(first?.failureReason).toMatch(/reverted on chain/);
  expect(second?.failureReason).toMatch(/less USDC than it owes/);

  await mintUsdc(local, payer.address, PAYER_FUNDS);
  await stack.servedPayingDebt(payer);
});

test('RPC slow but within its timeouts while the debt is settled: served, paid once, nothing forwarded unpaid', async () => {
  const { rpc, probe } = stack;
  // Owner 1's key again, a smart account of its own.
  const payer = await stack.owingPayer(1);
  const forwarded = probe.forwarded();
  const calledBefore = rpc.methods.length;
  stack.anthropic.script({ text: 'paid', usage: SMALL_USAGE });
  const started = performance.now();
  rpc.slow(RPC_DELAY_MS);
  let served: Awaited<ReturnType<typeof probe.chat>>;
  try {
    served = await probe.chat(payer.client(), payer.address);
  } finally {
    rpc.pass();
  }
  const elapsed = performance.now() - started;
  const called = rpc.methods.slice(calledBefore);
  // The settlement went through the slow node (sent, its receipt read), each call answered late.
  expect(called).toContain('eth_sendRawTransaction');
  expect(called).toContain('eth_getTransactionReceipt');
  expect(elapsed).toBeGreaterThanOrEqual(2 * RPC_DELAY_MS);
  expect(`${served.status} ${served.headers.get('x-settlement-amount')}`).toBe(`200 ${SMALL_COST}`);
  expect(served.headers.get('x-settlement-tx')).not.toBeNull();
  expect(probe.forwarded()).toBe(forwarded + 1);
  expect(await stack.settlementStates(payer.address)).toEqual([`confirmed ${SMALL_COST}`]);
  expect(
    called.filter((method) => method === 'eth_sendRawTransaction'),
    'one broadcast, not a retry',
  ).toHaveLength(1);

  // Its own usage was recorded and it is owed now; the next request finds the first paid (the
  // probe checks both as it arrives) and pays this one.
  await stack.servedPayingDebt(payer);
  expect(probe.violations).toEqual([]);
  expect(await stack.settlementStates(payer.address)).toEqual([
    `confirmed ${SMALL_COST}`,
    `confirmed ${SMALL_COST}`,
  ]);
  await stack.expectLedgerMatchesChain([payer.address]);
});

/** The smart account itself transfers its whole balance (as its owner could at any time). */
async function moveAllUsdc(from: Address, to: Address): Promise<void> {
  const { local } = stack;
  const amount = await usdcBalance(local, from);
  await local.testClient.impersonateAccount({ address: from });
  await local.testClient.setBalance({ address: from, value: 10n ** 18n });
  const hash = await local.testClient.sendUnsignedTransaction({
    from,
    to: local.usdc,
    data: encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [to, amount] }),
  });
  await local.publicClient.waitForTransactionReceipt({ hash });
  await local.testClient.stopImpersonatingAccount({ address: from });
}
