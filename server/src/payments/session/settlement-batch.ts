import type { Delegation } from '@metamask/smart-accounts-kit';
import type { Hash, Hex } from 'viem';
import { markSettlementsSent } from '../../billing/settlements.js';
import type { SettlementMetrics } from '../../observability/index.js';
import type { Store } from '../../store/database.js';
import {
  type ChainClient,
  cappedGasLimit,
  redeemDelegationsCalldata,
  type SignedTransaction,
} from '../chain/index.js';

/** One payer's settlement, simulated alone and ready to be sent with others. */
export interface BatchItem {
  settlementId: string;
  /** The payer's delegation to the session key, with the signature the DelegationManager verifies. */
  delegation: Delegation;
  /** The USDC `transfer` to the treasury its redemption executes. */
  transfer: Hex;
  /** The gas limit its own simulation gave, under its cap. */
  gas: bigint;
  /** Simulates it alone again: resolves with its gas limit, or throws what refuses it. */
  simulate(): Promise<bigint>;
}

/** The transaction that carries an item, and how many settlements it carries. */
export interface BatchSent {
  tx: SignedTransaction;
  items: number;
}

/**
 * Sends the settlements of different payers that fall due while one transaction is being mined
 * together, in one `redeemDelegations` at the next block: its cost is shared. Each caller waits for
 * its own receipt, as when sent alone.
 */
export interface SettlementBatcher {
  /**
   * Queues the item. Resolves once the transaction carrying it is recorded on its settlement (and on
   * every other one it carries) and broadcast; rejects as `Relayer.submit` does, or with what
   * refuses the item when it no longer passes its simulation.
   */
  send(item: BatchItem): Promise<BatchSent>;
}

export interface SettlementBatcherOptions {
  store: Store;
  chain: Pick<ChainClient, 'publicClient' | 'relayer' | 'usdc' | 'environment'>;
  /** The most settlements one transaction carries. */
  maxItems?: number;
  /** The longest a batch waits for the one before it to be mined; then it is sent anyway (its nonce follows). */
  maxWaitMs: number;
  /** Where the queue's length is shown (/metrics). */
  metrics?: Pick<SettlementMetrics, 'batchQueue'>;
}

/** A batch of 32 uses about 4M gas: far below a block's limit on Base. */
export const MAX_BATCH_ITEMS = 32;

interface Queued {
  item: BatchItem;
  resolve(sent: BatchSent): void;
  reject(error: unknown): void;
}

export function settlementBatcher(options: SettlementBatcherOptions): SettlementBatcher {
  const { store, chain } = options;
  const maxItems = options.maxItems ?? MAX_BATCH_ITEMS;
  const { maxWaitMs } = options;
  const queue: Queued[] = [];
  let running = false;
  // The last transaction sent, until it is mined (or waited for `maxWaitMs`).
  let mined: Promise<unknown> = Promise.resolve();

  const calldata = (items: readonly Queued[]) =>
    redeemDelegationsCalldata(
      items.map(({ item }) => ({ delegation: item.delegation, target: chain.usdc, callData: item.transfer })),
    );

  /** The batch's gas limit: its estimate and margin, under the per-item cap times its items. */
  const estimate = async (items: readonly Queued[]) => {
    const gas = await chain.publicClient.estimateGas({
      account: chain.relayer.address,
      to: chain.environment.DelegationManager,
      data: calldata(items),
    });
    return cappedGasLimit('sessionSettlement', gas, items.length);
  };

  const submit = async (items: readonly Queued[], gas: bigint): Promise<Hash | undefined> => {
    const ids = items.map(({ item }) => item.settlementId);
    try {
      const tx = await chain.relayer.submit(
        { to: chain.environment.DelegationManager, data: calldata(items), gas },
        (signed) => markSettlementsSent(store, ids, signed),
      );
      for (const queued of items) queued.resolve({ tx, items: items.length });
      return tx.hash;
    } catch (error) {
      for (const queued of items) queued.reject(error);
      return undefined;
    }
  };

  const eachAlone = async (items: readonly Queued[]) => {
    const hashes: Array<Hash | undefined> = [];
    for (const queued of items) hashes.push(await submit([queued], queued.item.gas));
    return hashes;
  };

  /** Sends `items` in one transaction, or those still passing alone when together they revert. */
  const sendBatch = async (items: readonly Queued[]): Promise<Array<Hash | undefined>> => {
    const [only] = items;
    if (only && items.length === 1) return [await submit(items, only.item.gas)];
    const together = await estimate(items).catch(() => undefined);
    if (together !== undefined) return [await submit(items, together)];
    // The chain moved since they were simulated (a payer's funds, a revoked delegation): each is
    // simulated alone again and those refused now are left out, owed, with their reason.
    const passing: Queued[] = [];
    await Promise.all(
      items.map((queued) =>
        queued.item.simulate().then(
          (gas) => {
            passing.push({ ...queued, item: { ...queued.item, gas } });
          },
          (error: unknown) => queued.reject(error),
        ),
      ),
    );
    if (passing.length <= 1) return eachAlone(passing);
    const gas = await estimate(passing).catch(() => undefined);
    return gas === undefined ? eachAlone(passing) : [await submit(passing, gas)];
  };

  const run = async () => {
    running = true;
    try {
      while (queue.length > 0) {
        await mined;
        const batch = queue.splice(0, maxItems);
        options.metrics?.batchQueue(queue.length);
        const hashes = await sendBatch(batch).catch((error: unknown) => {
          for (const queued of batch) queued.reject(error);
          return [];
        });
        // Nonces follow each other: the last one mined, every one is. (viem reads a 0 timeout as none.)
        const last = hashes.findLast((hash) => hash !== undefined);
        mined =
          last && maxWaitMs > 0
            ? chain.publicClient
                .waitForTransactionReceipt({ hash: last, timeout: maxWaitMs, checkReplacement: false })
                .catch(() => undefined)
            : Promise.resolve();
      }
    } finally {
      running = false;
    }
  };

  return {
    send(item) {
      return new Promise<BatchSent>((resolve, reject) => {
        queue.push({ item, resolve, reject });
        options.metrics?.batchQueue(queue.length);
        if (!running) void run();
      });
    },
  };
}
