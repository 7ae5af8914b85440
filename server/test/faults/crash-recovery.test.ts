import OpenAI from 'openai';
import type { Address } from 'viem';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { expect, test, vi } from 'vitest';
import { type SessionPayer, SMALL_COST, useFaultStack } from './harness.js';

// The gateway process is killed (SIGKILL) with a settlement on its way, and the chain node itself
// restarts losing its pool: after restarting, nothing is lost and nothing is paid twice.
const stack = useFaultStack();
/** Transactions wait in the node's pool until mined on demand. */
async function pauseMining() {
  await stack.local.testClient.setAutomine(false);
  await stack.local.testClient.setIntervalMining({ interval: 0 });
}

/** Resolves once the payer's settlement is recorded as sent: its transaction is signed and stored. */
async function sent(payer: Address) {
  await vi.waitFor(async () => expect(await stack.settlementStates(payer)).toEqual([`sent ${SMALL_COST}`]), {
    timeout: 10_000,
    interval: 20,
  });
}

/** The request the crash interrupts: its client sees the connection drop. */
function interrupted(payer: SessionPayer) {
  return stack.probe.chat(payer.client(), payer.address).then(
    (answer) => answer,
    (error: unknown) => error,
  );
}

/** The payer's request is under way when the gateway is killed, its settlement recorded as sent. */
async function killedOnceSent(payer: SessionPayer) {
  const request = interrupted(payer);
  await sent(payer.address);
  await stack.gateway.kill();
  expect(await request).toBeInstanceOf(OpenAI.APIConnectionError);
}

/** Killed with the settlement in the node's pool, which is mined afterwards. */
async function killedWhileInPool(payer: SessionPayer) {
  await pauseMining();
  try {
    await killedOnceSent(payer);
  } finally {
    // From now on each transaction is mined as it arrives.
    await stack.local.testClient.setAutomine(true);
  }
  await stack.local.testClient.mine({ blocks: 1 });
}

/** Restarted, the gateway has finished the settlement (once) before it listens; the next request owes nothing. */
async function restartedAndPaidOnce(payer: SessionPayer, forwardedBefore: number) {
  await stack.restart();
  expect(await stack.settlementStates(payer.address)).toEqual([`confirmed ${SMALL_COST}`]);
  // The interrupted request never reached the provider.
  expect(stack.probe.forwarded()).toBe(forwardedBefore);
  await servedWithoutPaying(payer);
  expect(stack.probe.violations).toEqual([]);
  await stack.expectLedgerMatchesChain([payer.address]);
}

/** After recovery the payer's next request is served with nothing more to pay. */
async function servedWithoutPaying(payer: SessionPayer) {
  const served = await stack.probe.chat(payer.client(), payer.address);
  expect(served.status).toBe(200);
  expect(served.headers.get('x-settlement-tx')).toBeNull();
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
  await pauseMining();
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
  await pauseMining();
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
