import { type Hex, parseGwei, parseTransaction } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createLocalChain, type LocalChain } from '../../devkit/chain/index.js';
import { createRelayer, offeredFees, replacementFees } from '../../src/payments/chain/relayer.js';

// What the gateway pays to unstick a transaction: the market's fees, raised enough for nodes to
// accept the replacement, and nothing while the market asks no more than the transaction offers.
// A transaction nothing records (a deployment) is sent once while unmined, and replaced when stuck.
const offered = { maxFeePerGas: parseGwei('2'), maxPriorityFeePerGas: parseGwei('1') };

test('no replacement while the market asks no more than the transaction offers', () => {
  expect(replacementFees(offered, offered)).toBeNull();
  expect(
    replacementFees(offered, { maxFeePerGas: parseGwei('1.5'), maxPriorityFeePerGas: parseGwei('0.5') }),
  ).toBeNull();
});

test('a replacement offers the market fees when they are well above the old ones', () => {
  const market = { maxFeePerGas: parseGwei('50'), maxPriorityFeePerGas: parseGwei('3') };
  expect(replacementFees(offered, market)).toEqual(market);
});

test('under the operator cap: a replacement never offers more, and none is sent when it leaves no raise', () => {
  const market = { maxFeePerGas: parseGwei('50'), maxPriorityFeePerGas: parseGwei('3') };
  expect(replacementFees(offered, market, parseGwei('10'))).toEqual({
    maxFeePerGas: parseGwei('10'),
    maxPriorityFeePerGas: parseGwei('3'),
  });
  // Capped at 2.2 gwei, the max fee cannot rise an eighth above 2: no replacement.
  expect(replacementFees(offered, market, parseGwei('2.2'))).toBeNull();
  expect(offeredFees(market, parseGwei('2'))).toEqual({
    maxFeePerGas: parseGwei('2'),
    maxPriorityFeePerGas: parseGwei('2'),
  });
  expect(offeredFees(market)).toEqual(market);
});

test('a replacement raises both fees by at least an eighth (nodes refuse less than a tenth)', () => {
  expect(
    replacementFees(offered, { maxFeePerGas: parseGwei('2.1'), maxPriorityFeePerGas: parseGwei('1') }),
  ).toEqual({ maxFeePerGas: parseGwei('2.25') + 1n, maxPriorityFeePerGas: parseGwei('1.125') + 1n });
  // A transaction whose tip exceeds its max fee is invalid: the max fee rises to cover the tip.
  expect(
    replacementFees(offered, { maxFeePerGas: parseGwei('2'), maxPriorityFeePerGas: parseGwei('4') }),
  ).toEqual({ maxFeePerGas: parseGwei('4'), maxPriorityFeePerGas: parseGwei('4') });
});

let local: LocalChain;
beforeAll(async () => {
  local = await createLocalChain();
});
afterAll(() => local?.stop());

test('a relayer under a fee cap (RELAYER_MAX_FEE_PER_GAS_WEI) offers no more than the cap', async () => {
  const cap = parseGwei('0.5');
  const relayer = createRelayer(
    local.publicClient,
    privateKeyToAccount(local.accounts.payers[4]!.privateKey),
    local.chainId,
    { maxFeePerGas: cap },
  );
  // The market asks a 1 gwei tip here: the transaction offers the cap, and is mined.
  expect((await local.publicClient.estimateFeesPerGas()).maxPriorityFeePerGas).toBeGreaterThan(cap);
  const sent = await relayer.submit(
    { to: local.accounts.treasury.address, data: '0x', gas: 21_000n },
    async () => {},
  );
  expect(parseTransaction(sent.raw)).toMatchObject({ maxFeePerGas: cap, maxPriorityFeePerGas: cap });
  expect(await relayer.waitForReceipt({ hash: sent.hash, timeout: 10_000 })).toMatchObject({
    status: 'success',
  });
});

test('a transaction sent once per key: not sent again while unmined, replaced under its nonce when stuck', async () => {
  const relayer = createRelayer(
    local.publicClient,
    privateKeyToAccount(local.accounts.payers[3]!.privateKey),
    local.chainId,
  );
  const call = { to: local.accounts.treasury.address, data: '0x' as Hex, gas: 21_000n };
  await local.testClient.setAutomine(false);
  await local.testClient.setIntervalMining({ interval: 0 });
  const first = await relayer.submitOnce('deploy:a', call, 60_000);
  // Asked again before it is stale: the same transaction, nothing more in the pool.
  expect(await relayer.submitOnce('deploy:a', call, 60_000)).toEqual(first);
  expect((await local.testClient.getTxpoolStatus()).pending).toBe(1);

  // A block comes at a base fee far above its max fee: it stays, and the market asks more.
  await local.testClient.setNextBlockBaseFeePerGas({ baseFeePerGas: parseGwei('1000') });
  await local.testClient.mine({ blocks: 1 });
  const replaced = await relayer.submitOnce('deploy:a', call, 0);
  expect(replaced.nonce).toBe(first.nonce);
  expect(replaced.hash).not.toBe(first.hash);
  await local.testClient.mine({ blocks: 1 });
  expect(await local.publicClient.getTransactionReceipt({ hash: replaced.hash })).toMatchObject({
    status: 'success',
  });
  await expect(local.publicClient.getTransactionReceipt({ hash: first.hash })).rejects.toThrow(
    /not be found/,
  );

  // Mined, it is forgotten: the next call with the key sends a new transaction.
  expect((await relayer.submitOnce('deploy:a', call, 60_000)).nonce).toBe(first.nonce + 1);
});
