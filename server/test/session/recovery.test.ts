import type { Address } from 'viem';
import { afterAll, expect, test } from 'vitest';
import {
  createLocalWalletClient,
  type LocalChain,
  type PayerAccount,
  usdcBalance,
} from '../../devkit/chain/index.js';
import { debtOf } from '../../src/billing/ledger.js';
import {
  markSettlementsSent,
  openSettlement,
  type Settlement,
  settlementsOf,
} from '../../src/billing/settlements.js';
import type { GatewayConfig } from '../../src/config.js';
import { type ChainClient, createChainClient } from '../../src/payments/chain/chain-client.js';
import { OUTBOX_FAILURES } from '../../src/payments/outbox/reconcile.js';
import { findSession } from '../../src/payments/session/session-records.js';
import { settlementCall } from '../../src/payments/session/session-settlement.js';
import { openStore, type Store } from '../../src/store/database.js';
import {
  type AnthropicStep,
  authorize,
  chat,
  type GatewayUnderTest,
  newPayer,
  openaiFor,
  type SessionStack,
  type Simulator,
  SMALL,
  SMALL_COST_ATOMIC,
  sessionGatewayConfig,
  startGateway,
  withSessionStack,
} from './harness.js';

let local: LocalChain;
let anthropic: Simulator<AnthropicStep>;
let database: SessionStack['database'];
let config: GatewayConfig;
const running: GatewayUnderTest[] = [];

withSessionStack(async (stack) => {
  ({ local, anthropic, database } = stack);
  config = sessionGatewayConfig(local, anthropic, { databaseUrl: database.url });
});

afterAll(async () => {
  for (const gateway of running) await gateway.close();
});

async function start(): Promise<GatewayUnderTest> {
  const gateway = await startGateway(config);
  running.push(gateway);
  return gateway;
}

async function stop(gateway: GatewayUnderTest): Promise<void> {
  running.splice(running.indexOf(gateway), 1);
  await gateway.close();
}

interface Debtor {
  payer: PayerAccount;
  token: string;
  sessionId: string;
}

/** A payer with a session and one answered request, i.e. 66 units owed. */
async function debtor(gateway: GatewayUnderTest, owner: number): Promise<Debtor> {
  const payer = await newPayer(local, owner);
  const session = await authorize(gateway, payer);
  anthropic.script({ text: 'owed', usage: SMALL });
  await chat(openaiFor(gateway, session.token));
  return { payer, token: session.token, sessionId: session.sessionId };
}

class Crash extends Error {}

/**
 * What the gateway does before broadcasting (claim the records, sign, store the transaction),
 * then the process "dies": with `broadcast` the transaction reached the node first.
 */
async function settleUntilCrash(
  store: Store,
  chain: ChainClient,
  debtorOf: Debtor,
  { broadcast }: { broadcast: boolean },
): Promise<Settlement> {
  const settlement = await openSettlement(store, debtorOf.payer.address, 'session');
  if (!settlement) throw new Error('nothing owed');
  const session = await findSession(store, debtorOf.sessionId);
  if (!session) throw new Error('no session');
  const { to, data } = settlementCall(chain, session, settlement.amountAtomic);
  const gas = await chain.publicClient.estimateGas({ account: chain.relayer.address, to, data });
  await chain.relayer
    .submit({ to, data, gas: gas * 2n }, async (tx) => {
      await markSettlementsSent(store, [settlement.id], tx);
      if (!broadcast) throw new Crash();
    })
    .catch((error: unknown) => {
      if (!(error instanceof Crash)) throw error;
    });
  return settlement;
}

const balance = (address: Address) => usdcBalance(local, address);

async function statusOf(store: Store, payer: Address) {
  const [last] = await settlementsOf(store, payer, { limit: 1 });
  return last && { status: last.status, amountAtomic: last.amountAtomic, failureReason: last.failureReason };
}

test('a crash around the broadcast never loses a payment nor makes one twice', async () => {
  const first = await start();
  const [mined, unsent, unsigned] = [await debtor(first, 0), await debtor(first, 1), await debtor(first, 2)];
  await stop(first);

  const store = openStore(config.databaseUrl);
  const chain = createChainClient(config.chain);
  const treasury = local.accounts.treasury.address;
  const before = {
    treasury: await balance(treasury),
    mined: await balance(mined.payer.address),
    unsent: await balance(unsent.payer.address),
  };
  try {
    // Sent and mined, but the gateway died before recording the receipt.
    const minedSettlement = await settleUntilCrash(store, chain, mined, { broadcast: true });
    await chain.publicClient.waitForTransactionReceipt({
      hash: (await txHashOf(store, minedSettlement.id)) as `0x${string}`,
    });
    // Signed and stored, but the gateway died before broadcasting it.
    await settleUntilCrash(store, chain, unsent, { broadcast: false });
    // Records claimed, nothing signed yet.
    await openSettlement(store, unsigned.payer.address, 'session');
    expect(await statusOf(store, mined.payer.address)).toMatchObject({ status: 'sent' });
    expect(await statusOf(store, unsent.payer.address)).toMatchObject({ status: 'sent' });
    expect(await statusOf(store, unsigned.payer.address)).toMatchObject({ status: 'pending' });
  } finally {
    await store.close();
  }

  // Start-up reconciles before the gateway listens.
  const second = await start();
  expect(await statusOf(second.store, mined.payer.address)).toEqual({
    status: 'confirmed',
    amountAtomic: SMALL_COST_ATOMIC,
    failureReason: null,
  });
  expect(await statusOf(second.store, unsent.payer.address)).toMatchObject({ status: 'confirmed' });
  expect(await statusOf(second.store, unsigned.payer.address)).toEqual({
    status: 'failed',
    amountAtomic: SMALL_COST_ATOMIC,
    failureReason: OUTBOX_FAILURES.neverSent,
  });
  expect(await balance(treasury)).toBe(before.treasury + 2n * SMALL_COST_ATOMIC);
  expect(await balance(mined.payer.address)).toBe(before.mined - SMALL_COST_ATOMIC);
  expect(await balance(unsent.payer.address)).toBe(before.unsent - SMALL_COST_ATOMIC);

  // The paid debts are not paid again; the released one is paid by the next request, once.
  anthropic.script({ text: 'a', usage: SMALL }, { text: 'b', usage: SMALL });
  const again = await chat(openaiFor(second, mined.token));
  expect(again.headers.get('x-settlement-tx')).toBeNull();
  const released = await chat(openaiFor(second, unsigned.token));
  expect(released.headers.get('x-settlement-amount')).toBe(SMALL_COST_ATOMIC.toString());
  expect(await balance(treasury)).toBe(before.treasury + 3n * SMALL_COST_ATOMIC);
  expect(await balance(mined.payer.address)).toBe(before.mined - SMALL_COST_ATOMIC);
  await stop(second);
});

test('a stored transaction whose nonce another transaction took is failed, and its debt released', async () => {
  const first = await start();
  const replaced = await debtor(first, 3);
  await stop(first);

  const store = openStore(config.databaseUrl);
  const chain = createChainClient(config.chain);
  try {
    await settleUntilCrash(store, chain, replaced, { broadcast: false });
  } finally {
    await store.close();
  }
  // The relayer key sends something else with that nonce (another instance, an operator).
  const relayer = createLocalWalletClient(local.chain, local.accounts.gateway.privateKey);
  const other = await relayer.sendTransaction({ to: local.accounts.treasury.address, value: 0n });
  await local.publicClient.waitForTransactionReceipt({ hash: other });
  const payerBefore = await balance(replaced.payer.address);

  const second = await start();
  expect(await statusOf(second.store, replaced.payer.address)).toEqual({
    status: 'failed',
    amountAtomic: SMALL_COST_ATOMIC,
    failureReason: OUTBOX_FAILURES.replaced,
  });
  expect(await balance(replaced.payer.address)).toBe(payerBefore);
  expect((await debtOf(second.store, replaced.payer.address)).owedAtomic).toBe(SMALL_COST_ATOMIC);
  anthropic.script({ text: 'pays', usage: SMALL });
  const next = await chat(openaiFor(second, replaced.token));
  expect(next.headers.get('x-settlement-amount')).toBe(SMALL_COST_ATOMIC.toString());
  expect(await balance(replaced.payer.address)).toBe(payerBefore - SMALL_COST_ATOMIC);
  await stop(second);
});

async function txHashOf(store: Store, id: string) {
  const row = await store.db
    .selectFrom('settlements')
    .select('tx_hash')
    .where('id', '=', id)
    .executeTakeFirst();
  return row?.tx_hash;
}
