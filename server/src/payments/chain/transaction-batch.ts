import type { Address, Hash, Hex } from 'viem';
import type { ChainClient } from './chain-client.js';
import { cappedGasLimit, type TransactionKind } from './gas-caps.js';
import type { SignedTransaction } from './relayer.js';

/** One payer's call, simulated alone and ready to be sent with others. */
export interface BatchedCall {
  /** The gas limit its own simulation gave, under its cap. */
  gas: bigint;
  /** Simulates it alone again: resolves with its gas limit, or throws what refuses it. */
  simulate(): Promise<bigint>;
}

/** The transaction that carries an item, and how many items it carries. */
export interface BatchSent {
  tx: SignedTransaction;
  items: number;
}

/** How a rail's calls of different payers go out in one transaction. */
export interface BatchTarget<Item extends BatchedCall> {
  /** Whose gas cap each item has. */
  kind: TransactionKind;
  /**
   * The transaction carrying `items` (one item: as it goes alone). `strict`: for the estimate, a
   * transaction that reverts when any item fails, so a failing one shows before anything is sent.
   */
  call(items: readonly Item[], strict: boolean): { to: Address; data: Hex };
  /** Records the signed transaction on every item it carries, before its broadcast (see `Relayer.submit`). */
  record(items: readonly Item[], tx: SignedTransaction): Promise<void>;
}

/**
 * Sends the calls of different payers that fall due while one transaction is being mined together,
 * in one transaction at the next block: its cost is shared. Each caller waits for its own receipt,
 * as when sent alone.
 */
export interface TransactionBatcher<Item extends BatchedCall> {
  /**
   * Queues the item. Resolves once the transaction carrying it is recorded on it (and on every other
   * item it carries) and broadcast; rejects as `Relayer.submit` does, or with what refuses the item
   * when it no longer passes its simulation.
   */
  send(item: Item): Promise<BatchSent>;
}

export interface TransactionBatcherOptions<Item extends BatchedCall> {
  chain: Pick<ChainClient, 'publicClient' | 'relayer'>;
  target: BatchTarget<Item>;
  /** The most items one transaction carries. */
  maxItems?: number;
  /** The longest a batch waits for the one before it to be mined; then it is sent anyway (its nonce follows). */
  maxWaitMs: number;
  /** Where the queue's length is shown (/metrics). */
  queued?: (items: number) => void;
}

/** A batch of 32 session settlements uses about 4M gas: far below a block's limit on Base. */
export const MAX_BATCH_ITEMS = 32;

interface Queued<Item> {
  item: Item;
  resolve(sent: BatchSent): void;
  reject(error: unknown): void;
}

export function transactionBatcher<Item extends BatchedCall>(
  options: TransactionBatcherOptions<Item>,
): TransactionBatcher<Item> {
  const { chain, target, maxWaitMs } = options;
  const maxItems = options.maxItems ?? MAX_BATCH_ITEMS;
  const queue: Queued<Item>[] = [];
  let running = false;
  // The last transaction sent, until it is mined (or waited for `maxWaitMs`).
  let mined: Promise<unknown> = Promise.resolve();

  const itemsOf = (batch: readonly Queued<Item>[]) => batch.map(({ item }) => item);

  /** The batch's gas limit: its estimate and margin, under the per-item cap times its items. */
  const estimate = async (batch: readonly Queued<Item>[]) => {
    const gas = await chain.publicClient.estimateGas({
      account: chain.relayer.address,
      ...target.call(itemsOf(batch), true),
    });
    return cappedGasLimit(target.kind, gas, batch.length);
  };

  const submit = async (batch: readonly Queued<Item>[], gas: bigint): Promise<Array<Hash | undefined>> => {
    const items = itemsOf(batch);
    let unrecorded = false;
    try {
      const tx = await chain.relayer.submit({ ...target.call(items, false), gas }, (signed) =>
        target.record(items, signed).catch((error: unknown) => {
          unrecorded = true;
          throw error;
        }),
      );
      for (const queued of batch) queued.resolve({ tx, items: batch.length });
      return [tx.hash];
    } catch (error) {
      // Not recorded, so not sent: one item's settlement that changed meanwhile (finished elsewhere)
      // refuses the record of all, and each is sent alone instead, that one refused on its own.
      if (unrecorded && batch.length > 1) return eachAlone(batch);
      for (const queued of batch) queued.reject(error);
      return [undefined];
    }
  };

  const eachAlone = async (batch: readonly Queued<Item>[]) => {
    const hashes: Array<Hash | undefined> = [];
    for (const queued of batch) hashes.push(...(await submit([queued], queued.item.gas)));
    return hashes;
  };

  /** Sends the batch in one transaction, or those still passing alone when together they revert. */
  const sendBatch = async (batch: readonly Queued<Item>[]): Promise<Array<Hash | undefined>> => {
    const [only] = batch;
    if (only && batch.length === 1) return submit(batch, only.item.gas);
    const together = await estimate(batch).catch(() => undefined);
    if (together !== undefined) return submit(batch, together);
    // The chain moved since they were simulated (a payer's funds, a revoked delegation): each is
    // simulated alone again and those refused now are left out, owed, with their reason.
    const passing: Queued<Item>[] = [];
    await Promise.all(
      batch.map((queued) =>
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
    return gas === undefined ? eachAlone(passing) : submit(passing, gas);
  };

  const run = async () => {
    running = true;
    try {
      while (queue.length > 0) {
        await mined;
        const batch = queue.splice(0, maxItems);
        options.queued?.(queue.length);
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
        options.queued?.(queue.length);
        if (!running) void run();
      });
    },
  };
}
