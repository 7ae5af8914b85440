import {
  type Hash,
  type Hex,
  parseTransaction,
  type TransactionReceipt,
  TransactionReceiptNotFoundError,
  WaitForTransactionReceiptTimeoutError,
} from 'viem';
import {
  confirmSettlement,
  failSettlement,
  findSettlement,
  listUnfinishedSettlements,
  replaceSettlementTransaction,
  type Settlement,
  SettlementStateError,
} from '../../billing/settlements.js';
import { type BatchShare, relayerCost, type SettlementMetrics } from '../../observability/index.js';
import { isStoreUnavailable, type Store } from '../../store/database.js';
import type { PayerLock } from '../../store/payer-lock.js';
import {
  BroadcastError,
  type ChainClient,
  isTransportFailure,
  nodeHolds,
  onSecondLook,
  paysTreasury,
  redemptionsIn,
} from '../chain/index.js';

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
  notPaid:
    'the settlement transaction succeeded but moved no USDC from the payer to the treasury; nothing was paid',
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
  // Each failure here stands on this look, so it holds only if nothing moved the row since.
  if (settlement.status === 'pending' || !settlement.txHash)
    return failSettlement(store, id, OUTBOX_FAILURES.neverSent, settlement);

  const sent = { settlement, raw: await signedTransactionOf(store, id) };
  const receipt =
    (await receiptOfAny(deps.chain, sentHashes(settlement))) ?? (await awaitIfKnown(deps, sent));
  if (receipt === 'in-flight') return (await findSettlement(store, id)) ?? settlement;
  if (receipt) return settleFromReceipt(deps, settlement, receipt);
  return failSettlement(store, id, OUTBOX_FAILURES.replaced, settlement);
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
  const unfinished = await listUnfinishedSettlements(deps.store, { ...options, rail: 'session' });
  return finishEach(unfinished, withPayerLock, (settlement) => reconcileSettlement(deps, settlement.id));
}

/**
 * Runs `finish` on each settlement under its payer's lock. One that cannot be finished (the node
 * refuses a call about it) does not keep the others from being finished: the first error is thrown
 * once every one was tried. A node or database that cannot be reached at all stops the walk at
 * once: every other settlement would wait out the same timeouts (at start-up, before listening).
 */
export async function finishEach<T>(
  settlements: readonly Settlement[],
  withPayerLock: PayerLock,
  finish: (settlement: Settlement) => Promise<T>,
): Promise<T[]> {
  const results: T[] = [];
  let failure: { error: unknown } | undefined;
  for (const settlement of settlements) {
    try {
      results.push(await withPayerLock(settlement.payer, () => finish(settlement)));
    } catch (error) {
      if (isTransportFailure(error) || isStoreUnavailable(error)) throw error;
      failure ??= { error };
    }
  }
  if (failure) throw failure.error;
  return results;
}

/**
 * Records the receipt of a settlement's own transaction: confirmed only when it moved what the
 * settlement owes from the payer to the treasury.
 */
export function settleFromReceipt(
  deps: OutboxDeps,
  settlement: Settlement,
  receipt: TransactionReceipt,
): Promise<Settlement> {
  const { store, chain } = deps;
  if (receipt.status !== 'success') return failSettlement(store, settlement.id, OUTBOX_FAILURES.reverted);
  const expected = {
    token: chain.usdc,
    payer: settlement.payer,
    treasury: settlement.payTo ?? chain.treasury,
    amount: settlement.amountAtomic,
  };
  if (!paysTreasury(receipt, expected)) return failSettlement(store, settlement.id, OUTBOX_FAILURES.notPaid);
  return confirmSettlement(store, settlement.id, {
    txHash: receipt.transactionHash,
    blockNumber: receipt.blockNumber,
    ...relayerCost(receipt, chain.relayer.address, batchShare(chain, settlement, receipt)),
  });
}

/** The settlement's place among the payers a transaction paid (several in a batch). */
export function batchShare(
  chain: Pick<ChainClient, 'environment'>,
  settlement: Pick<Settlement, 'payer'>,
  receipt: Pick<TransactionReceipt, 'logs'>,
): BatchShare {
  return redemptionsIn(receipt.logs, chain.environment.DelegationManager, settlement.payer);
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

/** A settlement's transaction as sent: the settlement (its hashes, its last change) and the signed transaction. */
export interface SentSettlement {
  settlement: Settlement;
  /** The signed transaction sent last; null when the gateway did not sign it. */
  raw: Hex | null;
}

/** Every transaction sent for the settlement under its nonce, the current one first: at most one is mined. */
export function sentHashes(settlement: Settlement): Hash[] {
  return settlement.txHash ? [settlement.txHash, ...settlement.replacedTxHashes.toReversed()] : [];
}

/**
 * A sent transaction not mined yet: replaced with higher fees once it waited a receipt timeout and
 * the market asks more than it offers; waited for while the node holds it; else broadcast again.
 * Null once it never can be mined: its nonce is used, and by none of the settlement's transactions.
 */
export async function awaitIfKnown(
  deps: OutboxDeps,
  sent: SentSettlement,
): Promise<TransactionReceipt | 'in-flight' | null> {
  const { chain } = deps;
  const { settlement, raw } = sent;
  const hashes = sentHashes(settlement);
  const [hash] = hashes;
  if (!hash) return null;
  // Sent by a remote facilitator: only the node's pool can tell.
  if (!raw) return (await nodeHolds(chain.publicClient, hash)) ? awaitReceipt(deps, hash) : 'in-flight';
  const { nonce } = parseTransaction(raw);
  const nonceUsed = async () =>
    nonce !== undefined &&
    (await chain.publicClient.getTransactionCount({ address: chain.relayer.address, blockTag: 'latest' })) >
      nonce;
  // Its nonce is taken: by one of its transactions (mined since the first look) or by another.
  const minedOrGone = () => onSecondLook(chain.publicClient, () => receiptOfAny(chain, hashes));
  if (await nonceUsed()) return minedOrGone();
  // Not mined within a receipt timeout: replaced when the market asks more than it offers (nodes
  // differ in whether they show a transaction priced below the base fee, so the pool is not asked).
  if (Date.now() - settlement.updatedAt.getTime() >= deps.receiptTimeoutMs) {
    const awaited = await replaceIfUnderpriced(deps, settlement, hash, raw);
    if (awaited !== hash) return awaited ? awaitReceipt(deps, awaited) : 'in-flight';
  }
  if (await nodeHolds(chain.publicClient, hash)) return awaitReceipt(deps, hash);
  // Not mined and not in the pool: only the stored transaction itself can still pay it.
  try {
    await chain.relayer.rebroadcast(raw);
  } catch (error) {
    // Refused for its nonce: mined meanwhile, or an earlier transaction of the settlement still waits.
    if (error instanceof BroadcastError && error.kind === 'nonce')
      return (await nonceUsed()) ? minedOrGone() : 'in-flight';
    if (error instanceof BroadcastError) return 'in-flight';
    throw error;
  }
  return awaitReceipt(deps, hash);
}

/**
 * Replaces a transaction not mined yet when the market asks more than it offers: recorded, then
 * broadcast. Resolves with the hash to wait for (the replacement, or `hash` when none was
 * needed), or null when the replacement could not be sent now (the next look decides).
 */
async function replaceIfUnderpriced(
  deps: OutboxDeps,
  settlement: Settlement,
  hash: Hash,
  raw: Hex,
): Promise<Hash | null> {
  try {
    const replacement = await deps.chain.relayer.replaceIfUnderpriced(raw, async (tx, replaced) => {
      await replaceSettlementTransaction(deps.store, settlement.id, replaced, tx);
    });
    if (!replacement) return hash;
    deps.metrics?.replaced(settlement.rail);
    return replacement.hash;
  } catch (error) {
    if (error instanceof BroadcastError || error instanceof SettlementStateError) return null;
    throw error;
  }
}

/** The receipt of whichever of `hashes` was mined, or null. */
async function receiptOfAny(chain: ChainClient, hashes: Hash[]): Promise<TransactionReceipt | null> {
  for (const hash of hashes) {
    const receipt = await receiptOf(chain, hash);
    if (receipt) return receipt;
  }
  return null;
}

async function receiptOf(chain: ChainClient, hash: Hash): Promise<TransactionReceipt | null> {
  try {
    return await chain.publicClient.getTransactionReceipt({ hash });
  } catch (error) {
    if (error instanceof TransactionReceiptNotFoundError) return null;
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
