import OpenAI from 'openai';
import type { Address, Hash } from 'viem';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { expect, test, vi } from 'vitest';
import { settlementsOf } from '../../src/billing/settlements.js';
import { expectEachPaidOnce, holdBlocks, releaseBlocks } from '../support/batches.js';
import { type Payer, SMALL_COST, useFaultStack } from './harness.js';

// The gateway process is killed (SIGKILL) with a settlement on its way, and the chain node itself
// restarts losing its pool: after restarting, nothing is lost and nothing is paid twice.
const stack = useFaultStack();

/** Resolves once the payer's settlement is recorded as sent: its transaction is signed and stored. */
async function sent(payer: Address) {
  await vi.waitFor(async () => expect(await stack.settlementStates(payer)).toEqual([`sent ${SMALL_COST}`]), {
    timeout: 10_000,
    interval: 20,
  });
}

/** The request the crash interrupts: its client sees the connection drop. */
function interrupted(payer: Payer) {
  return stack.probe.chat(payer.client(), payer.address).then(
    (answer) => answer,
    (error: unknown) => error,
  );
}

/** The payer's request is under way when the gateway is killed, its settlement recorded as sent. */
async function killedOnceSent(payer: Payer) {
  const request = interrupted(payer);
  await sent(payer.address);
  await stack.gateway.kill();
  expect(await request).toBeInstanceOf(OpenAI.APIConnectionError);
}

/** Killed with the settlement in the node's pool, which is mined afterwards. */
async function killedWhileInPool(payer: Payer) {
  await holdBlocks(stack.local);
  try {
    await killedOnceSent(payer);
  } finally {
    // From now on each transaction is mined as it arrives.
    await stack.local.testClient.setAutomine(true);
  }
  await stack.local.testClient.mine({ blocks: 1 });
}

/** Restarted, the gateway has finished the settlement (once) before it listens; the next request owes nothing. */
async function restartedAndPaidOnce(payer: Payer, forwardedBefore: number) {
  await stack.restart();
  expect(await stack.settlementStates(payer.address)).toEqual([`confirmed ${SMALL_COST}`]);
  // The interrupted request never reached the provider.
  expect(stack.probe.forwarded()).toBe(forwardedBefore);
  await servedWithoutPaying(payer);
  expect(stack.probe.violations).toEqual([]);
  await stack.expectLedgerMatchesChain([payer.address]);
}

/** After recovery the payer's next request is served with nothing more to pay. */
async function servedWithoutPaying(payer: Payer) {
  const settlements = (await stack.settlementStates(payer.address)).length;
  const served = await stack.probe.chat(payer.client(), payer.address);
  expect(served.status).toBe(200);
  // No settlement was opened for it.
  expect(await stack.settlementStates(payer.address)).toHaveLength(settlements);
}

test('SIGKILL while the settlement is in the pool: mined meanwhile, recorded at restart, paid once', async () => {
  const { probe } = stack;
  const payer = await stack.owingPayer(0);
  const forwarded = probe.forwarded();
  await killedWhileInPool(payer);
  // Start-up finishes the settlement from its receipt before the gateway listens.
  await restartedAndPaidOnce(payer, forwarded);
});

test('SIGKILL with the settlement stored but never broadcast: sent at restart, paid once', async () => {
  const { rpc, probe } = stack;
  const payer = await stack.owingPayer(1);
  const forwarded = probe.forwarded();
  // The broadcast hangs in the network, and is dropped there once the gateway is dead. The kill
  // waits for it: seeing the settlement stored is not enough, as the broadcast may not be out yet.
  const broadcast = rpc.stallFrom('eth_sendRawTransaction');
  try {
    const request = interrupted(payer);
    await broadcast;
    expect(await stack.settlementStates(payer.address)).toEqual([`sent ${SMALL_COST}`]);
    await stack.gateway.kill();
    expect(await request).toBeInstanceOf(OpenAI.APIConnectionError);
  } finally {
    rpc.down();
    rpc.pass();
  }
  await restartedAndPaidOnce(payer, forwarded);
});

test('the chain node restarts and loses the pending settlement: 503, then sent again and paid once', async () => {
  const { probe, rpc } = stack;
  const payer = await stack.owingPayer(2);
  const forwarded = probe.forwarded();
  const sends = () => rpc.methods.filter((method) => method === 'eth_sendRawTransaction').length;
  const sendsBefore = sends();
  await holdBlocks(stack.local);
  const request = interrupted(payer);
  await sent(payer.address);
  // Restarted from what was mined (with 0.2 s blocks again): the settlement's transaction is gone.
  await stack.restartChain();
  expect(await request).toMatchObject({ status: 503, code: 'payments_unavailable' });
  expect(probe.forwarded()).toBe(forwarded);
  expect(await stack.settlementStates(payer.address)).toEqual([`sent ${SMALL_COST}`]);

  await servedWithoutPaying(payer);
  // Its own signed transaction was broadcast again: the same payment, not a second one.
  expect(sends()).toBe(sendsBefore + 2);
  expect(await stack.settlementStates(payer.address)).toEqual([`confirmed ${SMALL_COST}`]);
  expect(probe.violations).toEqual([]);
  await stack.expectLedgerMatchesChain([payer.address]);
});

test('after the node lost a pending settlement, another payer is settled at once, and both pay once', async () => {
  const { probe } = stack;
  const [lost, other] = [await stack.owingPayer(3), await stack.owingPayer(4)];
  await holdBlocks(stack.local);
  const request = interrupted(lost);
  await sent(lost.address);
  await stack.restartChain();
  expect(await request).toMatchObject({ status: 503, code: 'payments_unavailable' });

  // The relayer must not send behind the lost transaction's nonce, where nothing would be mined.
  const served = await probe.chat(other.client(), other.address);
  expect(`${served.status} ${served.headers.get('x-settlement-amount')}`).toBe(`200 ${SMALL_COST}`);
  expect((await probe.chat(lost.client(), lost.address)).status).toBe(200);
  for (const payer of [lost, other])
    expect(
      (await stack.settlementStates(payer.address)).filter((state) => state.startsWith('confirmed')),
    ).toEqual([`confirmed ${SMALL_COST}`]);
  expect(probe.violations).toEqual([]);
  await stack.expectLedgerMatchesChain([lost.address, other.address]);
});

test('restarted with another TREASURY_ADDRESS while a settlement to the old one was in the pool: confirmed, not paid again', async () => {
  const { probe } = stack;
  const payer = await stack.owingPayer(5);
  const forwarded = probe.forwarded();
  await killedWhileInPool(payer);
  const treasury = stack.env.TREASURY_ADDRESS!;
  // The operator moves the treasury meanwhile: the settlement still paid the one it was opened for.
  stack.env.TREASURY_ADDRESS = privateKeyToAddress(generatePrivateKey());
  try {
    await stack.restart();
    expect(await stack.settlementStates(payer.address)).toEqual([`confirmed ${SMALL_COST}`]);
    expect(probe.forwarded()).toBe(forwarded);
  } finally {
    await stack.gateway.stop();
    stack.env.TREASURY_ADDRESS = treasury;
    await stack.restart();
  }
  await stack.expectLedgerMatchesChain([payer.address]);
});

/**
 * With a settlement waiting in the pool, the settlements of `payers` fall due: they are sent
 * together, in one transaction, once it is mined or the batch wait is over. Resolves with the
 * requests, under way, once all of theirs are recorded as sent on one hash.
 */
async function batchedBehind(payers: Payer[]) {
  const requests = payers.map(interrupted);
  let hash: string | null = null;
  await vi.waitFor(
    async () => {
      const rows = await Promise.all(
        payers.map(async (payer) => (await settlementsOf(stack.store, payer.address, { limit: 1 }))[0]),
      );
      expect(rows.map((row) => row?.status)).toEqual(payers.map(() => 'sent'));
      const hashes = new Set(rows.map((row) => row?.txHash));
      expect(hashes.size).toBe(1);
      hash = [...hashes][0] ?? null;
    },
    { timeout: 20_000, interval: 20 },
  );
  return { requests, hash: hash as unknown as Hash };
}

/** Restarted, every payer's settlement is confirmed once, the batch's on its one transaction. */
async function restartedAndBatchPaidOnce(payers: Payer[], hash: Hash, forwardedBefore: number) {
  await stack.restart();
  for (const payer of payers)
    expect(await stack.settlementStates(payer.address)).toEqual([`confirmed ${SMALL_COST}`]);
  expectEachPaidOnce(
    await stack.local.publicClient.getTransactionReceipt({ hash }),
    payers.slice(1).map((payer) => payer.address),
    stack.local.accounts.treasury.address,
    SMALL_COST,
  );
  expect(stack.probe.forwarded()).toBe(forwardedBefore);
  for (const payer of payers) await servedWithoutPaying(payer);
  expect(stack.probe.violations).toEqual([]);
  await stack.expectLedgerMatchesChain(payers.map((payer) => payer.address));
}

/**
 * The starter's settlement waits in the pool, the others' are sent behind it in one transaction,
 * and the gateway is killed; that transaction is mined meanwhile.
 */
async function killedWithBatchInPool(payers: Payer[]) {
  const [starter, ...batched] = payers as [Payer, ...Payer[]];
  const forwarded = stack.probe.forwarded();
  await holdBlocks(stack.local);
  try {
    const first = interrupted(starter);
    await sent(starter.address);
    const { requests, hash } = await batchedBehind(batched);
    // Recorded before its broadcast: killed once the node holds it.
    await vi.waitFor(() => stack.local.publicClient.getTransaction({ hash }), {
      timeout: 10_000,
      interval: 20,
    });
    await stack.gateway.kill();
    for (const request of requests) expect(await request).toBeInstanceOf(OpenAI.APIConnectionError);
    // Its receipt may have been waited for long enough to refuse it (503): forwarded, it is not.
    expect(await first).not.toMatchObject({ status: 200 });
    await releaseBlocks(stack.local);
    expect((await stack.local.publicClient.getTransactionReceipt({ hash })).status).toBe('success');
    await restartedAndBatchPaidOnce(payers, hash, forwarded);
  } finally {
    await stack.local.testClient.setAutomine(true);
  }
}

/**
 * The starter's settlement waits in the pool, the others' transaction is stored and its broadcast
 * hangs in the network when the gateway is killed: it is dropped there, never reaching the node.
 */
async function killedWithBatchNeverBroadcast(payers: Payer[]) {
  const { rpc } = stack;
  const [starter, ...batched] = payers as [Payer, ...Payer[]];
  const forwarded = stack.probe.forwarded();
  await holdBlocks(stack.local);
  try {
    const first = interrupted(starter);
    await sent(starter.address);
    // Once the starter's transaction is in the pool, the next broadcast (the batch's) hangs in the network.
    const [starterSettlement] = await settlementsOf(stack.store, starter.address, { limit: 1 });
    await vi.waitFor(
      () => stack.local.publicClient.getTransaction({ hash: starterSettlement?.txHash as Hash }),
      { timeout: 10_000, interval: 20 },
    );
    const broadcast = rpc.stallFrom('eth_sendRawTransaction');
    const { requests, hash } = await batchedBehind(batched);
    await broadcast;
    await stack.gateway.kill();
    for (const request of requests) expect(await request).toBeInstanceOf(OpenAI.APIConnectionError);
    // Its receipt may have been waited for long enough to refuse it (503): forwarded, it is not.
    expect(await first).not.toMatchObject({ status: 200 });
    rpc.down();
    rpc.pass();
    await releaseBlocks(stack.local);
    await restartedAndBatchPaidOnce(payers, hash, forwarded);
  } finally {
    rpc.pass();
    await stack.local.testClient.setAutomine(true);
  }
}

test('SIGKILL with a batch of three payers in the pool: mined meanwhile, each recorded once at restart', async () => {
  await killedWithBatchInPool([
    await stack.owingPayer(0),
    await stack.owingPayer(1),
    await stack.owingPayer(2),
    await stack.owingPayer(3),
  ]);
});

test('SIGKILL with a batch stored but never broadcast: broadcast again at restart, each payer paid once', async () => {
  await killedWithBatchNeverBroadcast([
    await stack.owingPayer(4),
    await stack.owingPayer(5),
    await stack.owingPayer(6),
    await stack.owingPayer(0),
  ]);
});

/** Four x402 payers owing a request each: the first's settlement goes alone, the others' in one Multicall3 transaction. */
async function owingX402Payers() {
  return [
    await stack.owingX402Payer(),
    await stack.owingX402Payer(),
    await stack.owingX402Payer(),
    await stack.owingX402Payer(),
  ];
}

test('x402: SIGKILL with a batch of three payers in the pool: mined meanwhile, each recorded once at restart', async () => {
  await killedWithBatchInPool(await owingX402Payers());
});

test('x402: SIGKILL with a batch stored but never broadcast: broadcast again at restart, each payer paid once', async () => {
  await killedWithBatchNeverBroadcast(await owingX402Payers());
});
