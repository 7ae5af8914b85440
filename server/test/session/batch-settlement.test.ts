import type { Address, Hash } from 'viem';
import { describe, expect, test } from 'vitest';
import { usdcBalance } from '../../devkit/chain/index.js';
import { debtOf } from '../../src/billing/ledger.js';
import { type Settlement, settlementsOf } from '../../src/billing/settlements.js';
import {
  emptyAccount,
  expectEachPaidOnce,
  expectGasShared,
  holdBlocks,
  newestSettlement,
  queuedOnEach,
  releaseBlocks,
  settlementsSent,
} from '../support/batches.js';
import {
  authorize,
  chat,
  MODEL,
  newPayer,
  openaiFor,
  SMALL,
  SMALL_COST_ATOMIC,
  useSessionGateway,
} from './harness.js';

// Settlements of different payers that fall due while one transaction is being mined go out
// together in one `redeemDelegations` at the next block; the test holds the chain's blocks to make
// them fall due together.

/**
 * Gas per payer settlement in a batch of 12 (the transaction's gas over 12), each payer's first and a
 * later one, on the client's caveat set (amount, calldata, timestamp): a few hundred gas above the
 * measured values; a regression guard, not a timing.
 */
const BATCH_CEILING_PER_PAYER = { first: 139_500n, later: 122_500n };

// A batch waits for the transaction before it however long the test holds the blocks.
const stack = useSessionGateway({ limits: { settlementBatchWaitMs: 120_000 } });

let salt = 0x10;

/** A payer with a session whose one answered request (66 units) is owed. */
async function owingPayer(owner: number) {
  const payer = await newPayer(stack.local, owner % 7, { salt: salt++ });
  const session = await authorize(stack.gateway, payer);
  stack.anthropic.script({ text: 'owed', usage: SMALL });
  await chat(openaiFor(stack.gateway, session.token));
  return { address: payer.address, token: session.token };
}

type OwingPayer = Awaited<ReturnType<typeof owingPayer>>;

/** A chat request by fetch: the 402's body is read whole. */
async function request(payer: OwingPayer) {
  const res = await fetch(`${stack.gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${payer.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 64 }),
  });
  return {
    status: res.status,
    tx: res.headers.get('x-settlement-tx') as Hash | null,
    body: (await res.json()) as { error?: { code: string; details?: Record<string, unknown> } },
  };
}

const newest = (payer: Address) => newestSettlement(stack.gateway.store, payer);
const sent = (payers: OwingPayer[]) =>
  settlementsSent(
    stack.gateway.store,
    payers.map((payer) => payer.address),
  );

/**
 * `starter`'s settlement is sent and waits in the pool; then each of `payers` requests, and its
 * settlement is opened and queued behind it. Resolves with the requests under way.
 */
async function dueWhileOneIsMined(starter: OwingPayer, payers: OwingPayer[]) {
  stack.anthropic.script(...[starter, ...payers].map(() => ({ text: 'next', usage: SMALL })));
  const first = request(starter);
  await sent([starter]);
  const answers = Promise.all(payers.map(request));
  // Each is opened and simulated alone, then joins the queue behind the starter's transaction.
  await queuedOnEach([stack.gateway], 'session', payers.length);
  return { first, answers };
}

/**
 * The settlements of `payers` fall due while `starter`'s is mined: they go out in one transaction at
 * the next block. Every request is answered 200; resolves with the answers and that transaction.
 */
async function settleTogether(starter: OwingPayer, payers: OwingPayer[]) {
  const forwarded = stack.anthropic.log.length;
  await holdBlocks(stack.local);
  let answers: Awaited<ReturnType<typeof request>>[];
  try {
    const due = await dueWhileOneIsMined(starter, payers);
    // The starter's block: the others go out together behind it.
    await stack.local.testClient.mine({ blocks: 1 });
    await sent(payers);
    await releaseBlocks(stack.local);
    expect((await due.first).status).toBe(200);
    answers = await due.answers;
  } finally {
    await stack.local.testClient.setAutomine(true);
  }
  expect(answers.map((answer) => answer.status)).toEqual(payers.map(() => 200));
  expect(stack.anthropic.log.length).toBe(forwarded + payers.length + 1);
  const [hash, ...others] = new Set(answers.map((answer) => answer.tx));
  expect(others).toEqual([]);
  const receipt = await stack.local.publicClient.getTransactionReceipt({ hash: hash as Hash });
  expect(receipt.status).toBe('success');
  return receipt;
}

describe('settlements of different payers falling due together', () => {
  test('12 payers settle in one transaction at the next block: each pays its own debt, gas shared', async () => {
    const starter = await owingPayer(0);
    const payers: OwingPayer[] = [];
    for (let index = 1; index <= 12; index++) payers.push(await owingPayer(index));
    const treasuryBefore = await usdcBalance(stack.local, stack.treasury);

    // Each payer's first settlement (its enforcer's counter is written), then a later one.
    const first = await settleTogether(starter, payers);
    const receipt = await settleTogether(starter, payers);
    expectEachPaidOnce(
      receipt,
      payers.map((payer) => payer.address),
      stack.treasury,
      SMALL_COST_ATOMIC,
    );
    expect(await usdcBalance(stack.local, stack.treasury)).toBe(treasuryBefore + 26n * SMALL_COST_ATOMIC);

    const settlements = await Promise.all(
      payers.map(async (payer) => (await newest(payer.address)) as Settlement),
    );
    for (const settlement of settlements)
      expect(settlement).toMatchObject({
        status: 'confirmed',
        txHash: receipt.transactionHash,
        amountAtomic: SMALL_COST_ATOMIC,
      });
    expectGasShared(receipt, settlements);
    const [firstPerPayer, laterPerPayer] = [first.gasUsed / 12n, receipt.gasUsed / 12n];
    console.log(
      `12 payers in one transaction, gas per payer settlement: first ${firstPerPayer} (${first.gasUsed} in all), later ${laterPerPayer} (${receipt.gasUsed})`,
    );
    expect(firstPerPayer).toBeLessThanOrEqual(BATCH_CEILING_PER_PAYER.first);
    expect(laterPerPayer).toBeLessThanOrEqual(BATCH_CEILING_PER_PAYER.later);
  });

  test('a payer whose USDC moved away after its simulation is left out: the others settle together, it stays owed (402)', async () => {
    const starter = await owingPayer(0);
    const [first, second, emptied] = [await owingPayer(1), await owingPayer(2), await owingPayer(3)];
    const forwarded = stack.anthropic.log.length;

    await holdBlocks(stack.local);
    let answers: Awaited<ReturnType<typeof request>>[];
    try {
      const due = await dueWhileOneIsMined(starter, [first, second, emptied]);
      // The payer moves its USDC away; it is mined in the starter's block, before the batch is sent.
      await emptyAccount(stack.local, emptied.address);
      await stack.local.testClient.mine({ blocks: 1 });
      expect(await usdcBalance(stack.local, emptied.address)).toBe(0n);
      await sent([first, second]);
      await releaseBlocks(stack.local);
      expect((await due.first).status).toBe(200);
      answers = await due.answers;
    } finally {
      await stack.local.testClient.setAutomine(true);
    }

    const [paidFirst, paidSecond, refused] = answers as [
      (typeof answers)[0],
      (typeof answers)[0],
      (typeof answers)[0],
    ];
    expect([paidFirst.status, paidSecond.status]).toEqual([200, 200]);
    expect(paidFirst.tx).toBe(paidSecond.tx);
    expect(refused.status).toBe(402);
    expect(refused.body.error?.details).toMatchObject({ reason: 'insufficient_balance', owedAtomic: '66' });
    // Only the starter's and the two payers' requests reached the provider.
    expect(stack.anthropic.log.length).toBe(forwarded + 3);
    expect((await debtOf(stack.gateway.store, emptied.address)).owedAtomic).toBe(SMALL_COST_ATOMIC);
    expect(await newest(emptied.address)).toMatchObject({ status: 'failed' });

    // The strict default: nothing is forwarded while its debt is unpaid.
    const again = await request(emptied);
    expect(again.status).toBe(402);
    expect(stack.anthropic.log.length).toBe(forwarded + 3);
  });

  test('a batch that reverts on chain (a payer moved its USDC in the same block, ahead of it) is sent again payer by payer: the others paid, that one owed (402)', async () => {
    const starter = await owingPayer(4);
    const [first, second, emptied] = [await owingPayer(5), await owingPayer(6), await owingPayer(7)];
    const forwarded = stack.anthropic.log.length;

    await holdBlocks(stack.local);
    let answers: Awaited<ReturnType<typeof request>>[];
    let batchHash: Hash | null | undefined;
    try {
      const due = await dueWhileOneIsMined(starter, [first, second, emptied]);
      await stack.local.testClient.mine({ blocks: 1 });
      // The batch passed its simulation and waits in the pool.
      const hashes = await sent([first, second, emptied]);
      expect(new Set(hashes).size).toBe(1);
      batchHash = hashes[0];
      // The payer moves its USDC with a higher tip: mined first in the next block.
      await emptyAccount(stack.local, emptied.address, { outbid: true });
      await releaseBlocks(stack.local);
      expect((await due.first).status).toBe(200);
      answers = await due.answers;
    } finally {
      await stack.local.testClient.setAutomine(true);
    }

    const receipt = await stack.local.publicClient.getTransactionReceipt({ hash: batchHash as Hash });
    expect(receipt.status).toBe('reverted');
    const [paidFirst, paidSecond, refused] = answers as [
      (typeof answers)[0],
      (typeof answers)[0],
      (typeof answers)[0],
    ];
    expect([paidFirst.status, paidSecond.status]).toEqual([200, 200]);
    // Each sent alone after the batch failed, each its own transaction.
    expect(new Set([paidFirst.tx, paidSecond.tx, batchHash]).size).toBe(3);
    for (const payer of [first, second]) {
      const settlements = await settlementsOf(stack.gateway.store, payer.address, { limit: 2 });
      expect(settlements.map((settlement) => settlement.status)).toEqual(['confirmed', 'failed']);
    }
    expect(refused.status).toBe(402);
    expect(refused.body.error?.details).toMatchObject({ reason: 'insufficient_balance', owedAtomic: '66' });
    expect(stack.anthropic.log.length).toBe(forwarded + 3);
    expect((await debtOf(stack.gateway.store, emptied.address)).owedAtomic).toBe(SMALL_COST_ATOMIC);
  });
});
