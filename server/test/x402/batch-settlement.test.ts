import type { Address, Hash, PrivateKeyAccount } from 'viem';
import { describe, expect, test } from 'vitest';
import { usdcBalance } from '../../devkit/chain/index.js';
import { debtOf } from '../../src/billing/ledger.js';
import { failSettlement, type Settlement } from '../../src/billing/settlements.js';
import { MULTICALL3_ADDRESS } from '../../src/payments/chain/index.js';
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
import { payDebt, payerOwingSmallCost, SMALL_COST, useX402Stack } from './harness.js';

// x402 settlements of different payers that fall due while one transaction is being mined go out
// together in one Multicall3 `aggregate3` at the next block; the test holds the chain's blocks to
// make them fall due together.

/**
 * Gas per payer settlement in a batch of 12 (the transaction's gas over 12), EOA payers: a few
 * hundred gas above the measured value; a regression guard, not a timing.
 */
const BATCH_CEILING_PER_PAYER = 48_500n;

// A batch waits for the transaction before it however long the test holds the blocks.
const stack = useX402Stack({ limits: { settlementBatchWaitMs: 120_000 } });

const request = (payer: PrivateKeyAccount) => payDebt(stack, payer);

type Answer = Awaited<ReturnType<typeof payDebt>>;

const newest = (payer: Address) => newestSettlement(stack.gateway.store, payer);
const sent = (payers: PrivateKeyAccount[]) =>
  settlementsSent(
    stack.gateway.store,
    payers.map((payer) => payer.address),
  );

/**
 * `starter`'s settlement is sent and waits in the pool; then each of `payers` pays, and its
 * settlement is simulated alone and queued behind it. Resolves with the requests under way.
 */
async function dueWhileOneIsMined(starter: PrivateKeyAccount, payers: PrivateKeyAccount[]) {
  const first = request(starter);
  await sent([starter]);
  const answers = Promise.all(payers.map(request));
  await queuedOnEach([stack.gateway], 'x402', payers.length);
  return { first, answers };
}

async function owingPayers(count: number): Promise<PrivateKeyAccount[]> {
  const payers: PrivateKeyAccount[] = [];
  for (let index = 0; index < count; index++) payers.push(await payerOwingSmallCost(stack));
  return payers;
}

/** A starter and three payers, each owing SMALL_COST: two that pay, one whose USDC moves away. */
async function starterAndThree() {
  const [starter, first, second, emptied] = (await owingPayers(4)) as [
    PrivateKeyAccount,
    PrivateKeyAccount,
    PrivateKeyAccount,
    PrivateKeyAccount,
  ];
  return { starter, first, second, emptied };
}

describe('x402 settlements of different payers falling due together', () => {
  test('12 payers settle in one Multicall3 transaction at the next block: each pays its own debt, gas shared', async () => {
    const { local, anthropic } = stack;
    const treasury = local.accounts.treasury.address;
    const [starter, ...payers] = (await owingPayers(13)) as [PrivateKeyAccount, ...PrivateKeyAccount[]];
    const treasuryBefore = await usdcBalance(local, treasury);
    const forwarded = anthropic.log.length;

    await holdBlocks(local);
    let answers: Answer[];
    try {
      const due = await dueWhileOneIsMined(starter, payers);
      // The starter's block: the others go out together behind it.
      await local.testClient.mine({ blocks: 1 });
      expect(new Set(await sent(payers)).size).toBe(1);
      await releaseBlocks(local);
      expect((await due.first).status).toBe(200);
      answers = await due.answers;
    } finally {
      await local.testClient.setAutomine(true);
    }

    expect(answers.map((answer) => answer.status)).toEqual(payers.map(() => 200));
    expect(anthropic.log.length).toBe(forwarded + 13);
    // Each client's PAYMENT-RESPONSE names the shared transaction.
    const [hash, ...others] = new Set(answers.map((answer) => answer.tx));
    expect(others).toEqual([]);
    const receipt = await local.publicClient.getTransactionReceipt({ hash: hash as Hash });
    expect(receipt).toMatchObject({ status: 'success', to: MULTICALL3_ADDRESS.toLowerCase() });
    expectEachPaidOnce(
      receipt,
      payers.map((payer) => payer.address),
      treasury,
      SMALL_COST,
    );
    expect(await usdcBalance(local, treasury)).toBe(treasuryBefore + 13n * SMALL_COST);
    // What each owes now is its paid request's cost.
    for (const payer of payers)
      expect((await debtOf(stack.gateway.store, payer.address)).owedAtomic).toBe(SMALL_COST);

    const settlements = await Promise.all(
      payers.map(async (payer) => (await newest(payer.address)) as Settlement),
    );
    for (const settlement of settlements)
      expect(settlement).toMatchObject({ status: 'confirmed', txHash: hash, amountAtomic: SMALL_COST });
    expectGasShared(receipt, settlements);
    const perPayer = receipt.gasUsed / 12n;
    // Alone, an EOA's settlement uses 68,5xx gas (test/chain/authorization-batch-gas.test.ts).
    console.log(
      `x402: 12 payers in one transaction, gas per payer settlement ${perPayer} (${receipt.gasUsed} in all)`,
    );
    expect(perPayer).toBeLessThanOrEqual(BATCH_CEILING_PER_PAYER);
  });

  test('a payer whose USDC moved after its simulation is left out: the others settle together, it is refused (402) and still owes', async () => {
    const { local, anthropic } = stack;
    const { starter, first, second, emptied } = await starterAndThree();
    const forwarded = anthropic.log.length;

    await holdBlocks(local);
    let answers: Answer[];
    try {
      const due = await dueWhileOneIsMined(starter, [first, second, emptied]);
      // Mined in the starter's block, before the batch is estimated.
      await emptyAccount(local, emptied.address);
      await local.testClient.mine({ blocks: 1 });
      expect(await usdcBalance(local, emptied.address)).toBe(0n);
      const [firstTx, secondTx] = await sent([first, second]);
      expect(firstTx).toBe(secondTx);
      await releaseBlocks(local);
      expect((await due.first).status).toBe(200);
      answers = await due.answers;
    } finally {
      await local.testClient.setAutomine(true);
    }

    const [paidFirst, paidSecond, refused] = answers as [Answer, Answer, Answer];
    expect([paidFirst.status, paidSecond.status]).toEqual([200, 200]);
    expect(paidFirst.tx).toBe(paidSecond.tx);
    expect(refused).toMatchObject({ status: 402 });
    // Only the starter's and the two payers' requests reached the provider.
    expect(anthropic.log.length).toBe(forwarded + 3);
    expect((await debtOf(stack.gateway.store, emptied.address)).owedAtomic).toBe(SMALL_COST);
    expect(await newest(emptied.address)).toMatchObject({ status: 'failed', txHash: null });
  });

  test('a payer whose USDC moves ahead of the batch in its block fails alone on chain: the others are paid, it is held (503) and still owes', async () => {
    const { local, anthropic } = stack;
    const { starter, first, second, emptied } = await starterAndThree();
    const forwarded = anthropic.log.length;
    const treasuryBefore = await usdcBalance(local, local.accounts.treasury.address);

    await holdBlocks(local);
    let answers: Answer[];
    let batchHash: Hash | null | undefined;
    try {
      const due = await dueWhileOneIsMined(starter, [first, second, emptied]);
      await local.testClient.mine({ blocks: 1 });
      // The batch passed its estimate and waits in the pool.
      const hashes = await sent([first, second, emptied]);
      expect(new Set(hashes).size).toBe(1);
      batchHash = hashes[0];
      // With a higher tip: mined first in the next block.
      await emptyAccount(local, emptied.address, { outbid: true });
      await releaseBlocks(local);
      expect((await due.first).status).toBe(200);
      answers = await due.answers;
    } finally {
      await local.testClient.setAutomine(true);
    }

    const receipt = await local.publicClient.getTransactionReceipt({ hash: batchHash as Hash });
    expect(receipt.status).toBe('success');
    const [paidFirst, paidSecond, held] = answers as [Answer, Answer, Answer];
    expect([paidFirst, paidSecond].map((answer) => [answer.status, answer.tx])).toEqual([
      [200, batchHash],
      [200, batchHash],
    ]);
    // Its authorization is still valid and public: anyone may land it while it is, so it is not failed yet.
    expect(held).toMatchObject({ status: 503, code: 'payments_unavailable' });
    expect(anthropic.log.length).toBe(forwarded + 3);
    expect(await usdcBalance(local, local.accounts.treasury.address)).toBe(treasuryBefore + 3n * SMALL_COST);
    expect((await debtOf(stack.gateway.store, emptied.address)).owedAtomic).toBe(SMALL_COST);
    // The two paid settlements carry the whole transaction's gas between them.
    expectGasShared(
      receipt,
      (await Promise.all([newest(first.address), newest(second.address)])) as Settlement[],
    );
  });
  test('a settlement finished elsewhere while queued (its row no longer unfinished) sinks no one: the others go alone, its authorization never lands', async () => {
    const { local, anthropic } = stack;
    const { starter, first, second, emptied: finished } = await starterAndThree();
    const forwarded = anthropic.log.length;
    const treasuryBefore = await usdcBalance(local, local.accounts.treasury.address);
    const balanceBefore = await usdcBalance(local, finished.address);

    await holdBlocks(local);
    let answers: Answer[];
    try {
      const due = await dueWhileOneIsMined(starter, [first, second, finished]);
      // As another instance finishing it would: the batch can no longer be recorded on all its rows.
      const row = (await newest(finished.address)) as Settlement;
      await failSettlement(stack.gateway.store, row.id, 'finished elsewhere');
      await local.testClient.mine({ blocks: 1 });
      const hashes = await sent([first, second]);
      expect(new Set(hashes).size).toBe(2);
      await releaseBlocks(local);
      expect((await due.first).status).toBe(200);
      answers = await due.answers;
    } finally {
      await local.testClient.setAutomine(true);
    }

    const [paidFirst, paidSecond, refused] = answers as [Answer, Answer, Answer];
    expect([paidFirst.status, paidSecond.status]).toEqual([200, 200]);
    expect(paidFirst.tx).not.toBe(paidSecond.tx);
    expect(refused).toMatchObject({ status: 402 });
    expect(anthropic.log.length).toBe(forwarded + 3);
    expect(await usdcBalance(local, finished.address)).toBe(balanceBefore);
    expect(await usdcBalance(local, local.accounts.treasury.address)).toBe(treasuryBefore + 3n * SMALL_COST);
    expect((await debtOf(stack.gateway.store, finished.address)).owedAtomic).toBe(SMALL_COST);
  });
});
