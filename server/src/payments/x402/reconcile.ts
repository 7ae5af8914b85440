import { eip3009ABI, PERMIT2_ADDRESS } from '@x402/evm';
import {
  type Address,
  type Hash,
  isAddressEqual,
  parseAbiItem,
  parseEventLogs,
  parseTransaction,
  type TransactionReceipt,
  TransactionReceiptNotFoundError,
} from 'viem';
import {
  confirmSettlement,
  failSettlement,
  findSettlement,
  listUnfinishedSettlements,
  markSettlementSent,
  type Settlement,
  SettlementStateError,
} from '../../billing/settlements.js';
import { type BatchShare, relayerCost } from '../../observability/index.js';
import type { Store } from '../../store/database.js';
import type { PayerLock } from '../../store/payer-lock.js';
import { BroadcastError, type ChainClient, paysTreasury } from '../chain/index.js';
import {
  awaitIfKnown,
  awaitReceipt,
  finishEach,
  type OutboxDeps,
  signedTransactionOf,
} from '../outbox/index.js';
import {
  authorizationOfSettlement,
  markAuthorizationUsed,
  type SeenAuthorization,
} from './authorizations.js';
import { isPermit2Authorization } from './upto.js';

export type ReconcileOutcome = 'confirmed' | 'failed' | 'pending';

const authorizationUsed = parseAbiItem(
  'event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)',
);
const authorizationCanceled = parseAbiItem(
  'event AuthorizationCanceled(address indexed authorizer, bytes32 indexed nonce)',
);
const transfer = parseAbiItem('event Transfer(address indexed from, address indexed to, uint256 value)');
const permit2NonceBitmapAbi = [
  {
    type: 'function',
    name: 'nonceBitmap',
    inputs: [{ type: 'address' }, { type: 'uint256' }],
    outputs: [{ type: 'uint256' }],
    stateMutability: 'view',
  },
] as const;

/**
 * Finishes an x402 settlement left pending or sent (a crash, a facilitator that did not answer, a
 * receipt that did not come in time) from what the chain says about its authorization. Confirmed
 * only by a transaction that moved its amount from the payer to the treasury; failed once the
 * authorization can never pay it (expired unused, canceled, or its nonce spent by a transaction
 * that paid something else: the nonce is the payer's, any authorization of the payer can spend
 * it); otherwise still pending. A transaction the gateway signed that the node lost is sent again
 * (see `resendIfLost`).
 */
export async function reconcileX402Settlement(
  deps: OutboxDeps,
  settlement: Settlement,
): Promise<ReconcileOutcome> {
  const { store, chain } = deps;
  if (settlement.status === 'confirmed' || settlement.status === 'failed') return settlement.status;
  // Refused with nothing sent (see markSettlementRefused): a node that could not say whether its
  // authorization was used then is asked again, not waited out until the authorization expires.
  if (settlement.status === 'pending' && settlement.failureReason !== null)
    return finishRefusedX402Settlement(deps, settlement, settlement.failureReason);
  const authorization = await authorizationOfSettlement(store, settlement.id);
  // Opened, but its proof was never recorded, so it was never handed to a facilitator: unless the
  // instance that opened it (whose payer lock was lost) records and sends it meanwhile, which the
  // failure then must not undo (`settlement` as read).
  if (!authorization) return fail(store, settlement.id, 'no payment proof was recorded', settlement);
  const paying = payingAuthorization(chain, settlement, authorization);
  const receipt = settlement.txHash ? await receiptOf(chain, settlement.txHash) : undefined;
  if (receipt && paysAuthorization(receipt, paying)) return confirm(deps, settlement.id, receipt, paying);
  const { spent, expired } = await nonceState(chain, authorization);
  if (spent) return settleFromSpentNonce(deps, settlement.id, paying, expired);
  if (expired) return fail(store, settlement.id, 'the payment authorization expired without being used');
  if (receipt?.status === 'reverted')
    // An upto permit or a delegation only the gateway's relayer can land, and it does not send it again. An
    // EIP-3009 authorization is public in the reverted transaction and still valid: anyone can land it.
    return isPermit2Authorization(authorization.asset) || isDelegationAuthorization(chain, authorization)
      ? fail(store, settlement.id, `the settlement's transaction ${receipt.transactionHash} reverted`)
      : 'pending';
  return settlement.txHash ? resendIfLost(deps, settlement, paying) : 'pending';
}

/**
 * Finishes a settlement the facilitator refused before any transaction was signed for it: failed
 * (for `reason`) unless its authorization's nonce is spent already. Anyone holding the proof can
 * land the authorization, and a facilitator then refuses to send it (its gas estimate reverts),
 * though the treasury may have been paid: the spend is judged as for any settlement.
 */
async function finishRefusedX402Settlement(
  deps: OutboxDeps,
  settlement: Settlement,
  reason: string,
): Promise<ReconcileOutcome> {
  const { store, chain } = deps;
  const authorization = await authorizationOfSettlement(store, settlement.id);
  if (authorization) {
    const { spent, expired } = await nonceState(chain, authorization);
    if (spent)
      return settleFromSpentNonce(
        deps,
        settlement.id,
        payingAuthorization(chain, settlement, authorization),
        expired,
      );
  }
  return fail(store, settlement.id, reason);
}

/**
 * Judged against the treasury the settlement was opened to pay, whatever the gateway is configured
 * with now, for the settlement's amount (an EIP-3009 authorization's value; at most an `upto`
 * permit's maximum), in USDC (a Permit2 nonce is kept by Permit2, a delegation's by its manager).
 */
function payingAuthorization(
  chain: Pick<ChainClient, 'treasury' | 'usdc' | 'environment'>,
  settlement: Settlement,
  authorization: SeenAuthorization,
): PayingAuthorization {
  const keptElsewhere =
    isPermit2Authorization(authorization.asset) || isDelegationAuthorization(chain, authorization);
  return {
    ...authorization,
    treasury: settlement.payTo ?? chain.treasury,
    token: keptElsewhere ? chain.usdc : authorization.asset,
    amountAtomic: settlement.amountAtomic,
  };
}

/** The nonce's state and the expiry read at one block: unused there and expired, it never can be used. */
async function nonceState(
  chain: Pick<ChainClient, 'publicClient' | 'environment'>,
  authorization: SeenAuthorization,
): Promise<{ spent: boolean; expired: boolean }> {
  const head = await chain.publicClient.getBlock({ blockTag: 'latest' });
  return {
    spent: await isNonceSpent(chain, authorization, head.number),
    expired: head.timestamp >= authorization.validBefore,
  };
}

/** Whether the token (Permit2, for a permit) holds the authorization's nonce as used (or canceled) at `blockNumber`. */
async function isNonceSpent(
  chain: Pick<ChainClient, 'publicClient' | 'environment'>,
  authorization: SeenAuthorization,
  blockNumber: bigint,
): Promise<boolean> {
  // A delegation keeps no nonce; only the relayer can redeem it, and does so only in its settlement.
  if (isDelegationAuthorization(chain, authorization)) return false;
  if (isPermit2Authorization(authorization.asset)) {
    const nonce = BigInt(authorization.nonce);
    const word = await chain.publicClient.readContract({
      address: PERMIT2_ADDRESS,
      abi: permit2NonceBitmapAbi,
      functionName: 'nonceBitmap',
      args: [authorization.payer, nonce >> 8n],
      blockNumber,
    });
    return ((word >> (nonce & 0xffn)) & 1n) === 1n;
  }
  return chain.publicClient.readContract({
    address: authorization.asset,
    abi: eip3009ABI,
    functionName: 'authorizationState',
    args: [authorization.payer, authorization.nonce],
    blockNumber,
  });
}

/**
 * The nonce is spent: confirmed when the transaction that used it paid this settlement; failed when
 * it paid something else or the payer canceled the authorization, since then it never can pay (the
 * debt is owed again, and the payer's next proof pays it).
 */
async function settleFromSpentNonce(
  deps: OutboxDeps,
  settlementId: string,
  authorization: PayingAuthorization,
  expired: boolean,
): Promise<ReconcileOutcome> {
  const { store, chain } = deps;
  const client = chain.publicClient;
  if (isPermit2Authorization(authorization.asset))
    return settleFromSpentPermit2Nonce(deps, settlementId, authorization, expired);
  const filter = {
    address: authorization.asset,
    args: { authorizer: authorization.payer, nonce: authorization.nonce },
    fromBlock: authorization.fromBlock ?? 0n,
  };
  const [used] = await client.getLogs({ ...filter, event: authorizationUsed });
  if (used) {
    const receipt = await client.getTransactionReceipt({ hash: used.transactionHash });
    if (paysAuthorization(receipt, authorization)) return confirm(deps, settlementId, receipt, authorization);
    return fail(
      store,
      settlementId,
      `the payment authorization's nonce was used by transaction ${used.transactionHash}, which did not pay ${authorization.amountAtomic} USDC atomic units to the treasury`,
    );
  }
  const [canceled] = await client.getLogs({ ...filter, event: authorizationCanceled });
  if (canceled)
    return fail(
      store,
      settlementId,
      `the payer canceled the payment authorization (transaction ${canceled.transactionHash})`,
    );
  // A node that serves state ahead of its log index: the next look finds the log. Once the
  // authorization has expired, a log still missing is no lag.
  if (!expired) return 'pending';
  return fail(store, settlementId, "the payment authorization's nonce was spent by no transaction found");
}

/**
 * A Permit2 nonce leaves no log of its own. Only the facilitator a permit names, the gateway's
 * relayer, can spend it (through x402's upto proxy), so the transaction that did is found among the
 * token's transfers from the payer to the treasury since the permit was handed to the facilitator.
 */
async function settleFromSpentPermit2Nonce(
  deps: OutboxDeps,
  settlementId: string,
  authorization: PayingAuthorization,
  expired: boolean,
): Promise<ReconcileOutcome> {
  const client = deps.chain.publicClient;
  const transfers = await client.getLogs({
    address: authorization.token,
    event: transfer,
    args: { from: authorization.payer, to: authorization.treasury },
    fromBlock: authorization.fromBlock ?? 0n,
  });
  for (const log of transfers) {
    if (log.args.value !== authorization.amountAtomic) continue;
    const receipt = await client.getTransactionReceipt({ hash: log.transactionHash });
    if (
      receipt.from.toLowerCase() === deps.chain.relayer.address.toLowerCase() &&
      paysAuthorization(receipt, authorization)
    )
      return confirm(deps, settlementId, receipt, authorization);
  }
  if (!expired) return 'pending';
  return fail(
    deps.store,
    settlementId,
    "the upto permit's nonce was spent by no transaction paying this settlement",
  );
}

/** Whether a replay guard's row is an ERC-7710 delegation proof (its nonce kept by the DelegationManager). */
function isDelegationAuthorization(
  chain: Pick<ChainClient, 'environment'>,
  authorization: SeenAuthorization,
): boolean {
  return isAddressEqual(authorization.asset, chain.environment.DelegationManager);
}

/** An authorization, the treasury its settlement pays, and the token and amount that pay it. */
type PayingAuthorization = SeenAuthorization & { treasury: Address; token: Address; amountAtomic: bigint };

/** The authorization's payment as a transaction must carry it to pay the settlement. */
function paysAuthorization(receipt: TransactionReceipt, authorization: PayingAuthorization): boolean {
  return paysTreasury(receipt, {
    token: authorization.token,
    payer: authorization.payer,
    treasury: authorization.treasury,
    amount: authorization.amountAtomic,
  });
}

/**
 * The authorization is unused and still valid, its transaction not mined: while the node holds the
 * transaction it is awaited, else it is broadcast again, and when its nonce went to another
 * transaction the same authorization is signed under a new nonce. Sending it twice is safe: the
 * token accepts an authorization's nonce once.
 */
async function resendIfLost(
  deps: OutboxDeps,
  settlement: Settlement,
  authorization: PayingAuthorization,
): Promise<ReconcileOutcome> {
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
  // One that reverted or paid nothing is judged by the next look, from the authorization's state.
  if (receipt === null || receipt === 'in-flight' || !paysAuthorization(receipt, authorization))
    return 'pending';
  return confirm(deps, settlementId, receipt, authorization);
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
  const outcomes = await finishEach(unfinished, withPayerLock, async (settlement) => {
    const current = await findSettlement(deps.store, settlement.id);
    return current ? reconcileX402Settlement(deps, current) : 'failed';
  });
  return unfinished.filter((_, i) => outcomes[i] === 'pending');
}

/**
 * Confirms the settlement with the transaction that paid it, and what that cost the relayer: its
 * share of a transaction that paid several.
 */
async function confirm(
  { store, chain }: Pick<OutboxDeps, 'store' | 'chain'>,
  settlementId: string,
  payment: TransactionReceipt,
  authorization: SeenAuthorization,
): Promise<ReconcileOutcome> {
  const { transactionHash: txHash, blockNumber } = payment;
  return finish(store, settlementId, async () => {
    const confirmed = await confirmSettlement(store, settlementId, {
      txHash,
      blockNumber,
      ...relayerCost(payment, chain.relayer.address, authorizationShare(payment, authorization)),
    });
    await markAuthorizationUsed(store, settlementId, txHash);
    return confirmed;
  });
}

/**
 * Fails the settlement: its records are owed again. Only once its authorization can never pay it
 * (and, with `readAs`, only while the settlement stands as it was read; see failSettlement).
 */
function fail(
  store: Store,
  settlementId: string,
  reason: string,
  readAs?: Settlement,
): Promise<ReconcileOutcome> {
  return finish(store, settlementId, () => failSettlement(store, settlementId, reason, readAs));
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

/**
 * The authorization's place among the EIP-3009 authorizations a transaction used (several in a
 * batch): none for a permit or a delegation, which are sent alone.
 */
export function authorizationShare(
  receipt: Pick<TransactionReceipt, 'logs'>,
  authorization: Pick<SeenAuthorization, 'asset' | 'payer' | 'nonce'>,
): BatchShare {
  const used = parseEventLogs({ abi: [authorizationUsed], logs: receipt.logs }).filter((log) =>
    isAddressEqual(log.address, authorization.asset),
  );
  return {
    count: used.length,
    position: used.findIndex(
      ({ args }) =>
        isAddressEqual(args.authorizer, authorization.payer) &&
        args.nonce.toLowerCase() === authorization.nonce.toLowerCase(),
    ),
  };
}

async function receiptOf(chain: Pick<ChainClient, 'publicClient'>, hash: Hash) {
  try {
    return await chain.publicClient.getTransactionReceipt({ hash });
  } catch (error) {
    if (error instanceof TransactionReceiptNotFoundError) return undefined;
    throw error;
  }
}
