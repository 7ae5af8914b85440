import { eip3009ABI } from '@x402/evm';
import { type Hash, parseAbiItem, parseTransaction, TransactionReceiptNotFoundError } from 'viem';
import {
  confirmSettlement,
  failSettlement,
  findSettlement,
  listUnfinishedSettlements,
  markSettlementSent,
  type Settlement,
  SettlementStateError,
} from '../../billing/settlements.js';
import type { Store } from '../../store/database.js';
import type { PayerLock } from '../../store/payer-lock.js';
import type { ChainClient } from '../chain-client.js';
import { awaitIfKnown, awaitReceipt, type OutboxDeps, signedTransactionOf } from '../outbox/reconcile.js';
import { BroadcastError } from '../relayer.js';
import { authorizationOfSettlement, markAuthorizationUsed } from './authorizations.js';

export type ReconcileOutcome = 'confirmed' | 'failed' | 'pending';

const authorizationUsed = parseAbiItem(
  'event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)',
);

/**
 * Finishes an x402 settlement left pending or sent (a crash, a facilitator that did not answer, a
 * receipt that did not come in time) from what the chain says about its authorization: used means
 * paid (confirmed with the transaction that used it); failed only once it can never be used any
 * more (expired, or its transaction reverted); otherwise it is still pending. A transaction the
 * gateway signed that the node lost is sent again (see `resendIfLost`).
 */
export async function reconcileX402Settlement(
  deps: OutboxDeps,
  settlement: Settlement,
): Promise<ReconcileOutcome> {
  const { store, chain } = deps;
  if (settlement.status === 'confirmed' || settlement.status === 'failed') return settlement.status;
  const authorization = await authorizationOfSettlement(store, settlement.id);
  if (!authorization) {
    // Opened, but its proof was never recorded, so it was never handed to a facilitator.
    return finish(store, settlement.id, () =>
      failSettlement(store, settlement.id, 'no payment proof was recorded'),
    );
  }
  const client = chain.publicClient;
  const receipt = settlement.txHash ? await receiptOf(chain, settlement.txHash) : undefined;
  if (receipt?.status === 'success')
    return confirm(store, settlement.id, receipt.transactionHash, receipt.blockNumber);
  const used = await client.readContract({
    address: authorization.asset,
    abi: eip3009ABI,
    functionName: 'authorizationState',
    args: [authorization.payer, authorization.nonce],
  });
  if (used) {
    const [log] = await client.getLogs({
      address: authorization.asset,
      event: authorizationUsed,
      args: { authorizer: authorization.payer, nonce: authorization.nonce },
      fromBlock: authorization.fromBlock ?? 0n,
    });
    // A node that serves state ahead of its log index: the next look finds it.
    if (!log) return 'pending';
    return confirm(store, settlement.id, log.transactionHash, log.blockNumber);
  }
  if (receipt?.status === 'reverted')
    return finish(store, settlement.id, () =>
      failSettlement(store, settlement.id, `the payment transaction ${receipt.transactionHash} reverted`),
    );
  const head = await client.getBlock({ blockTag: 'latest' });
  if (head.timestamp >= authorization.validBefore)
    return finish(store, settlement.id, () =>
      failSettlement(store, settlement.id, 'the payment authorization expired without being used'),
    );
  return settlement.txHash ? resendIfLost(deps, settlement) : 'pending';
}

/**
 * The authorization is unused and still valid, its transaction not mined: while the node holds the
 * transaction it is awaited, else it is broadcast again, and when its nonce went to another
 * transaction the same authorization is signed under a new nonce. Sending it twice is safe: the
 * token accepts an authorization's nonce once.
 */
async function resendIfLost(deps: OutboxDeps, settlement: Settlement): Promise<ReconcileOutcome> {
  const { store, chain } = deps;
  const settlementId = settlement.id;
  const raw = await signedTransactionOf(store, settlementId);
  // Sent by a remote facilitator: only it holds the transaction.
  if (!raw) return 'pending';
  let receipt = await awaitIfKnown(deps, { settlement, raw });
  if (receipt === null) {
    const { to, data, gas } = parseTransaction(raw);
    if (!to || !data || gas === undefined) return 'pending';
    try {
      const sent = await chain.relayer.submit({ to, data, gas }, async (tx) => {
        await markSettlementSent(store, settlementId, tx.hash, tx.raw);
      });
      receipt = await awaitReceipt(deps, sent.hash);
    } catch (error) {
      // Recorded before its broadcast: the next look finds it sent or lost again.
      if (error instanceof BroadcastError) return 'pending';
      throw error;
    }
  }
  // A reverted one is judged by the next look, from the authorization's state.
  if (receipt === null || receipt === 'in-flight' || receipt.status !== 'success') return 'pending';
  return confirm(store, settlementId, receipt.transactionHash, receipt.blockNumber);
}

/**
 * Reconciles the x402 settlements left pending or sent (those last touched before `olderThan`, when
 * given), each under its payer's lock: at start-up, and from the collector for payers who do not
 * come back. Returns those that may still land.
 */
export async function finishUnfinishedX402Settlements(
  deps: OutboxDeps,
  withPayerLock: PayerLock,
  options: { olderThan?: Date } = {},
): Promise<Settlement[]> {
  const unfinished = await listUnfinishedSettlements(deps.store, { ...options, rail: 'x402' });
  const pending: Settlement[] = [];
  for (const settlement of unfinished) {
    const outcome = await withPayerLock(settlement.payer, async () => {
      const current = await findSettlement(deps.store, settlement.id);
      return current ? reconcileX402Settlement(deps, current) : 'failed';
    });
    if (outcome === 'pending') pending.push(settlement);
  }
  return pending;
}

async function confirm(
  store: Store,
  settlementId: string,
  txHash: Hash,
  blockNumber: bigint,
): Promise<ReconcileOutcome> {
  return finish(store, settlementId, async () => {
    const confirmed = await confirmSettlement(store, settlementId, { txHash, blockNumber });
    await markAuthorizationUsed(store, settlementId, txHash);
    return confirmed;
  });
}

/** Runs the transition; another instance finishing the same settlement first is not an error. */
async function finish(
  store: Store,
  settlementId: string,
  transition: () => Promise<Settlement>,
): Promise<ReconcileOutcome> {
  let settlement: Settlement | undefined;
  try {
    settlement = await transition();
  } catch (error) {
    if (!(error instanceof SettlementStateError)) throw error;
    settlement = await findSettlement(store, settlementId);
  }
  if (settlement?.status === 'confirmed' || settlement?.status === 'failed') return settlement.status;
  return 'pending';
}

async function receiptOf(chain: Pick<ChainClient, 'publicClient'>, hash: Hash) {
  try {
    return await chain.publicClient.getTransactionReceipt({ hash });
  } catch (error) {
    if (error instanceof TransactionReceiptNotFoundError) return undefined;
    throw error;
  }
}
