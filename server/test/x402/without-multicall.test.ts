import type { Hash } from 'viem';
import { expect, test } from 'vitest';
import { usdcBalance } from '../../devkit/chain/index.js';
import { MULTICALL3_ADDRESS } from '../../src/payments/chain/index.js';
import { holdBlocks, releaseBlocks, settlementsSent } from '../support/batches.js';
import { payDebt, payerOwingSmallCost, SMALL_COST, useX402Stack } from './harness.js';

// On a chain without Multicall3 a call to its address would "succeed" doing nothing: x402
// settlements falling due together then go alone, each paying the treasury.

const stack = useX402Stack({ limits: { settlementBatchWaitMs: 120_000 } });

test('without Multicall3 on the chain, settlements falling due together are each sent alone and paid', async () => {
  const { local } = stack;
  const code = await local.publicClient.getCode({ address: MULTICALL3_ADDRESS });
  const payers = [
    await payerOwingSmallCost(stack),
    await payerOwingSmallCost(stack),
    await payerOwingSmallCost(stack),
  ];
  const [starter, ...others] = payers as [(typeof payers)[0], ...typeof payers];
  const treasury = local.accounts.treasury.address;
  const before = await usdcBalance(local, treasury);
  await local.testClient.setCode({ address: MULTICALL3_ADDRESS, bytecode: '0x' });
  await holdBlocks(local);
  let answers: Awaited<ReturnType<typeof payDebt>>[];
  try {
    const first = payDebt(stack, starter);
    await settlementsSent(stack.gateway.store, [starter.address]);
    const due = Promise.all(others.map((payer) => payDebt(stack, payer)));
    // Sent at once, each on its own, while the starter's transaction still waits in the pool.
    const hashes = await settlementsSent(
      stack.gateway.store,
      others.map((payer) => payer.address),
    );
    expect(new Set(hashes).size).toBe(2);
    await releaseBlocks(local);
    answers = [await first, ...(await due)];
  } finally {
    await local.testClient.setAutomine(true);
    await local.testClient.setCode({ address: MULTICALL3_ADDRESS, bytecode: code ?? '0x' });
  }

  expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200]);
  for (const answer of answers) {
    const receipt = await local.publicClient.getTransactionReceipt({ hash: answer.tx as Hash });
    expect(receipt.to).toBe(local.usdc.toLowerCase());
  }
  expect(new Set(answers.map((answer) => answer.tx)).size).toBe(3);
  expect(await usdcBalance(local, treasury)).toBe(before + 3n * SMALL_COST);
});
