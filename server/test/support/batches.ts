import { type Address, encodeFunctionData, type Hash, parseEventLogs, type TransactionReceipt } from 'viem';
import { expect, vi } from 'vitest';
import { type LocalChain, testUsdcAbi, usdcBalance } from '../../devkit/chain/index.js';
import { type Settlement, settlementsOf } from '../../src/billing/settlements.js';
import type { Store } from '../../src/store/database.js';
import { sampleValue, scrapeMetrics } from '../observability/prometheus-text.js';

// Settlements of different payers that fall due while one transaction is being mined go out together
// at the next block; tests hold the chain's blocks to make them fall due together.

/** Blocks are mined only when the test says so. */
export async function holdBlocks(local: LocalChain): Promise<void> {
  await local.testClient.setAutomine(false);
  await local.testClient.setIntervalMining({ interval: 0 });
}

/** Each transaction is mined as it arrives again, those waiting first. */
export async function releaseBlocks(local: LocalChain): Promise<void> {
  await local.testClient.setAutomine(true);
  await local.testClient.mine({ blocks: 1 });
}

/** The batch paid each payer's `amount` to the treasury once, and nothing else. */
export function expectEachPaidOnce(
  receipt: TransactionReceipt,
  payers: readonly Address[],
  treasury: Address,
  amount: bigint,
): void {
  const transfers = parseEventLogs({ abi: testUsdcAbi, logs: receipt.logs, eventName: 'Transfer' }).map(
    ({ args }) => args,
  );
  expect(transfers).toHaveLength(payers.length);
  expect(transfers).toEqual(
    expect.arrayContaining(payers.map((from) => ({ from, to: treasury, value: amount }))),
  );
}

/** Each settlement keeps its share of the transaction's gas and fee; the shares add up to it exactly. */
export function expectGasShared(receipt: TransactionReceipt, settlements: readonly Settlement[]): void {
  const sum = (values: Array<bigint | null>) =>
    values.reduce<bigint>((total, value) => total + (value ?? 0n), 0n);
  expect(sum(settlements.map((settlement) => settlement.gasUsed))).toBe(receipt.gasUsed);
  expect(sum(settlements.map((settlement) => settlement.feeWei))).toBe(
    receipt.gasUsed * receipt.effectiveGasPrice,
  );
}

/**
 * The payer moves all its USDC away, as its owner could at any time: sent now, mined with the next
 * block (first in it with `outbid`, whose tip is above the gateway's).
 */
export async function emptyAccount(local: LocalChain, payer: Address, options: { outbid?: boolean } = {}) {
  await local.testClient.impersonateAccount({ address: payer });
  await local.testClient.setBalance({ address: payer, value: 10n ** 18n });
  await local.testClient.sendUnsignedTransaction({
    from: payer,
    to: local.usdc,
    data: encodeFunctionData({
      abi: testUsdcAbi,
      functionName: 'transfer',
      args: [local.accounts.deployer.address, await usdcBalance(local, payer)],
    }),
    ...(options.outbid && { maxFeePerGas: 500_000_000_000n, maxPriorityFeePerGas: 100_000_000_000n }),
  });
  await local.testClient.stopImpersonatingAccount({ address: payer });
}

/** The payer's newest settlement in the store. */
export async function newestSettlement(store: Store, payer: Address): Promise<Settlement | undefined> {
  return (await settlementsOf(store, payer, { limit: 1 }))[0];
}

/** Waits until each payer's newest settlement is sent; resolves with their transactions, in order. */
export async function settlementsSent(store: Store, payers: readonly Address[]): Promise<Array<Hash | null>> {
  let hashes: Array<Hash | null> = [];
  await vi.waitFor(
    async () => {
      const rows = await Promise.all(payers.map((payer) => newestSettlement(store, payer)));
      expect(rows.map((row) => row?.status)).toEqual(payers.map(() => 'sent'));
      hashes = rows.map((row) => row?.txHash ?? null);
    },
    { timeout: 20_000, interval: 20 },
  );
  return hashes;
}

/** Waits until each gateway's queue of the rail's settlements behind the transaction being mined holds `items`. */
export async function queuedOnEach(
  gateways: ReadonlyArray<{ url: string }>,
  rail: 'session' | 'x402',
  items: number,
): Promise<void> {
  await vi.waitFor(
    async () => {
      for (const gateway of gateways)
        expect(
          sampleValue(await scrapeMetrics(gateway.url), 'paygate_settlement_batch_queue', { rail }),
        ).toBe(items);
    },
    { timeout: 60_000, interval: 20 },
  );
}
