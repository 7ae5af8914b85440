import {
  type Hash,
  type Hex,
  parseTransaction,
  TransactionNotFoundError,
  type TransactionReceipt,
  TransactionReceiptNotFoundError,
  WaitForTransactionReceiptTimeoutError,
} from 'viem';
import {
  confirmSettlement,
  failSettlement,
  findSettlement,
  listUnfinishedSettlements,
  type Settlement,
} from '../../billing/settlements.js';
import type { SettlementMetrics } from '../../observability/index.js';
import type { Store } from '../../store/database.js';
import type { PayerLock } from '../../store/payer-lock.js';
import type { ChainClient } from '../chain-client.js';
import { BroadcastError } from '../relayer.js';

export interface OutboxDeps {
  store: Store;
  chain: ChainClient;
  /** Longest wait for a receipt; past it the settlement stays `sent` for a later pass. */
  receiptTimeoutMs: number;
  /** Where each settlement's outcome and time are counted (/metrics). */
  metrics?: SettlementMetrics;
}

/** The reasons stored on settlements the outbox had to fail. */
export const OUTBOX_FAILURES = {
  neverSent: 'not broadcast: the gateway stopped before sending the transaction; nothing was paid',
  reverted: 'the settlement transaction reverted on chain; nothing was paid',
  replaced:
    'the settlement transaction was dropped: its nonce was used by another transaction; nothing was paid',
  refused: 'the node refused the settlement transaction; nothing was paid',
} as const;

/**
 * Finishes one pending or sent session-rail settlement from what the chain says, so that a crash
 * between sending and recording never loses a payment nor makes one twice. Call it under the
 * payer's lock. Returns the settlement as it stands afterwards (still `sent` when the transaction
 * is in flight but not mined within the timeout).
 */
export async function reconcileSettlement(deps: OutboxDeps, id: string): Promise<Settlement> {
  const { store } = deps;
  const settlement = await findSettlement(store, id);
  if (!settlement) throw new Error(`settlement ${id} does not exist`);
  if (settlement.status !== 'pending' && settlement.status !== 'sent') return settlement;
  // The transaction is broadcast only after the row is marked sent: a pending row was never sent.
  if (settlement.status === 'pending' || !settlement.txHash)
    return failSettlement(store, id, OUTBOX_FAILURES.neverSent);

  const raw = await signedTransactionOf(store, id);
  const hash = settlement.txHash;
  const receipt = (await receiptOf(deps.chain, hash)) ?? (await awaitIfKnown(deps, hash, raw));
  if (receipt === 'in-flight') return settlement;
  if (receipt) return settleFromReceipt(store, id, receipt);
  return failSettlement(store, id, OUTBOX_FAILURES.replaced);
}

/**
 * Finishes the session rail's pending and sent settlements (those last touched before `olderThan`,
 * when given), each under its payer's lock: at start-up, and from the collector for any left in flight.
 */
export async function finishUnfinishedSettlements(
  deps: OutboxDeps,
  withPayerLock: PayerLock,
  options: { olderThan?: Date } = {},
): Promise<Settlement[]> {
  const cutoff = options.olderThan?.getTime() ?? Number.POSITIVE_INFINITY;
  const unfinished = (await listUnfinishedSettlements(deps.store)).filter(
    (settlement) => settlement.rail === 'session' && settlement.updatedAt.getTime() < cutoff,
  );
  const finished: Settlement[] = [];
  for (const settlement of unfinished)
    finished.push(await withPayerLock(settlement.payer, () => reconcileSettlement(deps, settlement.id)));
  return finished;
}

/** Records the receipt of a settlement's own transaction. */
export function settleFromReceipt(
  store: Store,
  id: string,
  receipt: TransactionReceipt,
): Promise<Settlement> {
  if (receipt.status === 'success')
    return confirmSettlement(store, id, {
      txHash: receipt.transactionHash,
      blockNumber: receipt.blockNumber,
    });
  return failSettlement(store, id, OUTBOX_FAILURES.reverted);
}

/**
 * Waits for `hash` to be mined: 'in-flight' when it is still not within the timeout, or null once it
 * is certain it never will be (its nonce is used by another transaction).
 */
export async function awaitReceipt(
  deps: OutboxDeps,
  hash: Hash,
): Promise<TransactionReceipt | 'in-flight' | null> {
  try {
    const receipt = await deps.chain.relayer.waitForReceipt({
      hash,
      timeout: deps.receiptTimeoutMs,
      checkReplacement: false,
    });
    return receipt.transactionHash === hash ? receipt : null;
  } catch (error) {
    if (error instanceof WaitForTransactionReceiptTimeoutError) return 'in-flight';
    throw error;
  }
}

/**
 * A sent transaction not mined yet: waits for it while the node holds it, else broadcasts the signed
 * transaction again. Null once it never can be mined (its nonce is used by another transaction).
 */
export async function awaitIfKnown(
  deps: OutboxDeps,
  hash: Hash,
  raw: Hex | null,
): Promise<TransactionReceipt | 'in-flight' | null> {
  const { chain } = deps;
  if (await isPending(chain, hash)) return awaitReceipt(deps, hash);
  // Not mined and not in the pool: only the stored transaction itself can still pay it.
  if (!raw) return 'in-flight';
  const { nonce } = parseTransaction(raw);
  const used = await chain.publicClient.getTransactionCount({
    address: chain.relayer.address,
    blockTag: 'latest',
  });
  // Its nonce is taken: by this very transaction (mined since the first look) or by another.
  if (nonce !== undefined && used > nonce) return receiptOf(chain, hash);
  try {
    await chain.relayer.rebroadcast(raw);
  } catch (error) {
    if (error instanceof BroadcastError && error.kind === 'nonce') return receiptOf(chain, hash);
    if (error instanceof BroadcastError) return 'in-flight';
    throw error;
  }
  return awaitReceipt(deps, hash);
}

async function receiptOf(chain: ChainClient, hash: Hash): Promise<TransactionReceipt | null> {
  try {
    return await chain.publicClient.getTransactionReceipt({ hash });
  } catch (error) {
    if (error instanceof TransactionReceiptNotFoundError) return null;
    throw error;
  }
}

async function isPending(chain: ChainClient, hash: Hash): Promise<boolean> {
  try {
    await chain.publicClient.getTransaction({ hash });
    return true;
  } catch (error) {
    if (error instanceof TransactionNotFoundError) return false;
    throw error;
  }
}

/** The signed transaction stored before its broadcast; null when the gateway did not sign it. */
export async function signedTransactionOf(store: Store, id: string): Promise<Hex | null> {
  const row = await store.db
    .selectFrom('settlements')
    .select('tx_raw')
    .where('id', '=', id)
    .executeTakeFirst();
  return row?.tx_raw ?? null;
}
