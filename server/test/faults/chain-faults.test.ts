import { expect, test } from 'vitest';
import { settlementsOf } from '../../src/billing/settlements.js';
import { SMALL_COST, useFaultStack } from './harness.js';

// The chain's RPC fails at each step of a settlement while a gateway process settles a payer's
// debt: before anything is sent, right after the broadcast, and on the broadcast itself.
const stack = useFaultStack();

test('RPC down while the debt is settled: 503, nothing forwarded, the debt paid once it is back', async () => {
  const { rpc } = stack;
  const payer = await stack.owingPayer(0);
  const refused = await stack.refusedWhileCut(
    payer,
    { cut: rpc.down, restore: rpc.pass },
    '503 payments_unavailable',
  );
  expect(refused.headers.get('retry-after')).not.toBeNull();

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
  expect(probe.forwarded()).toBe(forwarded);
  // While the node cannot be reached, the settlement in flight cannot be looked up: 503 again.
  rpc.down();
  try {
    const unreachable = await probe.chat(payer.client(), payer.address);
    expect(`${unreachable.status} ${unreachable.code}`).toBe('503 payments_unavailable');
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

test('the node took the settlement but its answer says "nonce too low" (a retried delivery): it is not paid twice', async () => {
  const { rpc } = stack;
  const payer = await stack.owingPayer(4);
  const misreported = rpc.misreportNext('eth_sendRawTransaction', 'nonce too low');
  const refused = await stack.probe.chat(payer.client(), payer.address);
  await misreported;
  expect(`${refused.status} ${refused.code}`).toBe('503 payments_unavailable');

  // The next request finds the transaction mined: that one payment is the settlement.
  const served = await stack.probe.chat(payer.client(), payer.address);
  expect(served.status).toBe(200);
  expect(await stack.settlementStates(payer.address)).toEqual([`confirmed ${SMALL_COST}`]);
  expect(stack.probe.violations).toEqual([]);
  await stack.expectLedgerMatchesChain([payer.address]);
});
