import { type Address, BaseError, encodeFunctionData, erc20Abi, type Hash, type Hex } from 'viem';
import { PICO_PER_ATOMIC } from '../../billing/money.js';
import {
  failSettlement,
  markSettlementsSent,
  openSettlement,
  type Settlement,
  SettlementInProgressError,
} from '../../billing/settlements.js';
import type { SettlementOutcome } from '../../observability/index.js';
import {
  type BatchSent,
  BroadcastError,
  type ChainClient,
  cappedGasLimit,
  chainErrorReason,
  delegatorCode,
  deploysDeleGator,
  GAS_CAPS,
  GasCapExceededError,
  gasCostPicoUsd,
  NONCE_ATTEMPTS,
  nodeHolds,
  onSecondLook,
  type PendingDeployment,
  redeemableSignature,
  redeemDelegationCalldata,
  usdcBalanceOf,
} from '../chain/index.js';
import {
  awaitReceipt,
  batchShare,
  OUTBOX_FAILURES,
  type OutboxDeps,
  reconcileSettlement,
  refusalFromRevert,
  SettlementRefusedError,
  SettlementRevertedError,
  SettlementUnavailableError,
  settleFromReceipt,
} from '../outbox/index.js';
import type { SessionRecord } from './session-records.js';
import type { BatchItem, SettlementBatcher } from './settlement-batch.js';

/** A confirmed payment of a payer's debt. */
export interface SettledDebt {
  settlementId: string;
  txHash: Hash;
  amountAtomic: bigint;
  blockNumber: bigint;
}

/** The outbox, and the batcher that sends this payer's settlement with other payers' (none: alone). */
export interface SessionSettlementDeps extends OutboxDeps {
  batcher?: SettlementBatcher;
}

export interface SettleOptions {
  /**
   * The collector's settlements, which no request of the payer asked for: an account is deployed
   * only for a debt above what its deployment may cost the operator in gas.
   */
  weighDeploymentCost?: boolean;
}

/**
 * The ordering rule's payment: everything the session's payer owes for completed requests is
 * transferred from its smart account to the treasury by redeeming the session's delegation, and
 * confirmed on chain. Call it under the payer's lock. Resolves with the payment, or null when
 * nothing was owed; throws SettlementRefusedError (the payer's side: cap, expiry, balance,
 * revocation) or SettlementUnavailableError (the gateway's side; the outbox finishes it later).
 */
export async function settleSessionDebt(
  deps: SessionSettlementDeps,
  session: SessionRecord,
  options: SettleOptions = {},
): Promise<SettledDebt | null> {
  let alone = false;
  for (let attempt = 1; ; attempt++) {
    const settlement = await openAfterUnfinished(deps, session);
    if (!settlement) return null;
    const seconds = () => (Date.now() - settlement.createdAt.getTime()) / 1000;
    try {
      const settled = await pay(deps, session, settlement, { ...options, alone });
      deps.metrics?.settled('session', 'confirmed', seconds());
      return settled;
    } catch (error) {
      if (error instanceof BroadcastError && error.kind === 'nonce' && attempt < NONCE_ATTEMPTS) continue;
      // A batch that reverted (the chain moved between its simulation and its block) sank this payer
      // with another: its settlement was failed, its records are owed again, and it is sent alone once.
      if (error instanceof SettlementRevertedError && error.batched && !alone) {
        alone = true;
        continue;
      }
      // A broadcast lost on the way stays `sent` (it may be mined); one refused for its nonce was failed.
      const failure = error instanceof BroadcastError ? unavailable(error, error.kind === 'unknown') : error;
      deps.metrics?.settled('session', settlementOutcome(failure), seconds());
      throw failure;
    }
  }
}

/**
 * Opens the payer's next settlement, paid through `session` (whose totals count it once confirmed),
 * first finishing one a crash or a timeout left unfinished.
 */
async function openAfterUnfinished(deps: OutboxDeps, session: SessionRecord): Promise<Settlement | null> {
  const open = () => openSettlement(deps.store, session.wallet, 'session', deps.chain.treasury, session.id);
  try {
    return await open();
  } catch (error) {
    if (!(error instanceof SettlementInProgressError)) throw error;
    const unfinished = error.settlement;
    if (unfinished.rail !== 'session')
      throw new SettlementUnavailableError(
        `an ${unfinished.rail} payment of this payer is being settled; retry shortly`,
        true,
      );
    // A node that cannot be reached leaves it unfinished: the payer is told to retry, as when sending.
    // Only a sent one asks the chain (a pending one was never sent, and is failed at once).
    const finished = await reconcileSettlement(deps, unfinished.id).catch((error: unknown) => {
      throw error instanceof BaseError ? unavailable(error, true) : error;
    });
    if (finished.status === 'sent')
      throw new SettlementUnavailableError(
        `the previous settlement ${finished.txHash} of this payer is not confirmed yet; retry shortly`,
        true,
      );
    return open();
  }
}

async function pay(
  deps: SessionSettlementDeps,
  session: SessionRecord,
  settlement: Settlement,
  options: SettleOptions & { alone: boolean },
): Promise<SettledDebt> {
  const { store, chain } = deps;
  const owed = settlement.amountAtomic;
  const redeemable = redeemableSignature(session.signature);
  const call = settlementCall(chain, session, owed);

  let sent: BatchSent;
  try {
    if (redeemable.deployment)
      await ensureDeployed(deps, session.wallet, redeemable.deployment, owed, options);
    const [simulated, code] = await Promise.all([
      simulate(deps, call.to, call.data, owed).then(
        (gas) => ({ gas }),
        (error: unknown) => ({ error }),
      ),
      delegatorCode(deps.chain.publicClient, session.wallet, deps.chain.environment).catch(
        (error: unknown) => {
          throw unavailable(error, false);
        },
      ),
    ]);
    // Just deployed, but a node behind the one that mined the deployment may not show it yet (and
    // then the simulation reverts too): nothing the payer must fix.
    if (code === 'none' && redeemable.deployment)
      throw new SettlementUnavailableError(
        `the account ${session.wallet} shows no code yet on the chain's node; retry shortly`,
        false,
      );
    // The owner cleared its EIP-7702 delegation: its redemption reverts, for no reason the chain
    // tells (or the node words it as something else). Not for good: the next request tries again.
    if (code === 'none')
      throw new SettlementRefusedError(
        'invalid_delegation',
        'the account has no code on chain any more (its EIP-7702 delegation was cleared?): it is no longer a MetaMask smart account',
        owed,
      );
    if ('error' in simulated) throw simulated.error;
    const { gas } = simulated;
    // Checked at authorization; an account's owner can change its implementation since.
    if (code !== 'delegator')
      throw new SettlementRefusedError(
        'invalid_delegation',
        'the account is no longer a MetaMask smart account of the Delegation Framework (its code or implementation changed)',
        owed,
      );
    const item: BatchItem = {
      settlementId: settlement.id,
      delegation: { ...session.delegation, signature: redeemable.signature },
      transfer: call.transfer,
      gas,
      simulate: () => simulate(deps, call.to, call.data, owed),
    };
    sent =
      deps.batcher && !options.alone
        ? await deps.batcher.send(item)
        : {
            tx: await chain.relayer.submit({ to: call.to, data: call.data, gas }, (tx) =>
              markSettlementsSent(store, [settlement.id], tx),
            ),
            items: 1,
          };
  } catch (caught) {
    // Sent or not, a broadcast that failed on the way stays `sent`: the outbox decides from the chain.
    if (caught instanceof BroadcastError && caught.kind === 'unknown') throw caught;
    // Refused for its nonce, yet held or mined: an earlier delivery of this very broadcast got
    // through (a proxy retried it). Failing it would claim its records again and pay them twice.
    if (
      caught instanceof BroadcastError &&
      (await onSecondLook(chain.publicClient, () => nodeHolds(chain.publicClient, caught.hash)).catch(
        () => true,
      ))
    )
      throw new BroadcastError('unknown', caught.hash, caught);
    // A node call that failed before anything was sent (fees, nonce, code): retryable, and told
    // without the RPC URL, which may carry an API key (the reason is stored and shown).
    const error = caught instanceof BaseError ? unavailable(caught, false) : caught;
    const reason =
      error instanceof BroadcastError
        ? OUTBOX_FAILURES.refused
        : error instanceof Error
          ? error.message
          : String(error);
    await failSettlement(store, settlement.id, reason);
    throw error;
  }

  const receipt = await awaitReceipt(deps, sent.tx.hash).catch((error: unknown) => {
    throw new SettlementUnavailableError(
      `settlement ${sent.tx.hash} was sent but its receipt cannot be read (${chainErrorReason(error)}); retry shortly`,
      true,
    );
  });
  if (receipt === 'in-flight')
    throw new SettlementUnavailableError(
      `settlement ${sent.tx.hash} is not confirmed yet; retry shortly`,
      true,
    );
  if (receipt === null) {
    await failSettlement(store, settlement.id, OUTBOX_FAILURES.replaced);
    throw new SettlementUnavailableError(`settlement ${sent.tx.hash} was dropped; retry`, false);
  }
  deps.metrics?.gasSpent('session', 'settlement', receipt, batchShare(chain, settlement, receipt));
  const final = await settleFromReceipt(deps, settlement, receipt);
  // Its simulation passed: a revert on chain says the state moved meanwhile (or the gateway's gas
  // fell short), not what the payer must fix. The next attempt simulates again and tells which.
  if (receipt.status !== 'success') throw new SettlementRevertedError(sent.tx.hash, sent.items > 1);
  if (final.status !== 'confirmed') throw new SettlementRefusedError('not_paid', undefined, owed);
  return {
    settlementId: settlement.id,
    txHash: sent.tx.hash,
    amountAtomic: owed,
    blockNumber: receipt.blockNumber,
  };
}

/**
 * The DelegationManager call that transfers `amountAtomic` USDC from the session's smart account to
 * the treasury: one delegation, one execution, in the single default mode.
 */
export function settlementCall(
  chain: Pick<ChainClient, 'usdc' | 'treasury' | 'environment'>,
  session: Pick<SessionRecord, 'delegation' | 'signature'>,
  amountAtomic: bigint,
): { to: Address; data: Hex; transfer: Hex } {
  const transfer = encodeFunctionData({
    abi: erc20Abi,
    functionName: 'transfer',
    args: [chain.treasury, amountAtomic],
  });
  return {
    transfer,
    to: chain.environment.DelegationManager,
    data: redeemDelegationCalldata(
      { ...session.delegation, signature: redeemableSignature(session.signature).signature },
      chain.usdc,
      transfer,
    ),
  };
}

/** Simulates the call from the relayer; resolves with the gas to send it with. */
async function simulate(deps: OutboxDeps, to: Address, data: Hex, owed: bigint): Promise<bigint> {
  let gas: bigint;
  try {
    gas = await deps.chain.publicClient.estimateGas({ account: deps.chain.relayer.address, to, data });
  } catch (error) {
    throw refusalFromRevert(error, owed) ?? unavailable(error, false);
  }
  try {
    return cappedGasLimit('sessionSettlement', gas);
  } catch (error) {
    if (!(error instanceof GasCapExceededError)) throw error;
    throw new SettlementRefusedError(
      'invalid_delegation',
      `its redemption needs ${gas} gas; the gateway spends at most ${error.cap} on a settlement`,
      owed,
    );
  }
}

/**
 * An account authorized with an ERC-6492 signature is deployed by the gateway, through the
 * framework's factory, before its first settlement: the DelegationManager only verifies deployed
 * accounts. Only once its USDC covers the debt: the operator's gas goes to accounts that can pay.
 */
async function ensureDeployed(
  deps: OutboxDeps,
  account: Address,
  deployment: PendingDeployment,
  owed: bigint,
  options: SettleOptions,
): Promise<void> {
  const { chain } = deps;
  if (await chain.publicClient.getCode({ address: account })) return;
  let gas: bigint;
  try {
    gas = await chain.publicClient.estimateGas({
      account: chain.relayer.address,
      to: deployment.factory,
      data: deployment.factoryData,
    });
  } catch (error) {
    if (refusalFromRevert(error, owed))
      throw new SettlementRefusedError('account_not_deployed', undefined, owed);
    throw unavailable(error, false);
  }
  // Checked at authorization too; a session authorized before those checks existed meets them here.
  if (!(await deploysDeleGator(deployment, chain.environment)))
    throw new SettlementRefusedError(
      'account_not_deployed',
      'it is not a DeleGator proxy of the framework',
      owed,
    );
  if (gas > GAS_CAPS.deployment)
    throw new SettlementRefusedError('account_not_deployed', `its deployment needs ${gas} gas`, owed);
  const gasLimit = cappedGasLimit('deployment', gas);
  await ensureDeploymentPays(deps, account, owed, gasLimit, options);
  // No settlement records it (deploying twice is impossible, and a lost deployment is simply
  // redone): sent once while unmined, remembered in the store across restarts and instances, so a
  // deployment stuck below the market is replaced, not queued behind.
  const sent = await chain.relayer
    .submitOnce(
      `deploy:${account}`,
      { to: deployment.factory, data: deployment.factoryData, gas: gasLimit },
      deps.receiptTimeoutMs,
    )
    .catch((error: unknown) => {
      throw unavailable(error, false);
    });
  // A deployment in flight pays nothing: the settlement is not sent, and is failed (see pay).
  const receipt = await awaitReceipt(deps, sent.hash).catch((error: unknown) => {
    throw unavailable(error, false);
  });
  if (receipt === 'in-flight' || receipt === null)
    throw new SettlementUnavailableError(
      `the deployment of ${account} is not confirmed yet; retry shortly`,
      false,
    );
  deps.metrics?.gasSpent('session', 'deployment', receipt);
  if (receipt.status !== 'success') throw new SettlementRefusedError('account_not_deployed', undefined, owed);
}

/**
 * Refuses the deployment of an account whose USDC does not cover its debt and, for the collector,
 * that of one whose debt is below what the deployment's gas may cost at the market's fees.
 */
async function ensureDeploymentPays(
  deps: OutboxDeps,
  account: Address,
  owed: bigint,
  gasLimit: bigint,
  options: SettleOptions,
): Promise<void> {
  const [balance, fees] = await Promise.all([
    usdcBalanceOf(deps.chain, account),
    options.weighDeploymentCost ? deps.chain.publicClient.estimateFeesPerGas() : undefined,
  ]).catch((error: unknown) => {
    throw unavailable(error, false);
  });
  if (balance < owed)
    throw new SettlementRefusedError(
      'insufficient_balance',
      `it holds ${balance} and owes ${owed} USDC atomic units; the gateway deploys it once its balance covers its debt`,
      owed,
    );
  if (!fees) return;
  const costPicoUsd = gasCostPicoUsd(gasLimit, fees.maxFeePerGas);
  if (owed * PICO_PER_ATOMIC < costPicoUsd)
    throw new SettlementRefusedError(
      'account_not_deployed',
      `its debt of ${owed} USDC atomic units is below what deploying it may cost the gateway (${costPicoUsd} pico-USD of gas); it is deployed when the payer's next request settles`,
      owed,
    );
}

function settlementOutcome(error: unknown): SettlementOutcome {
  if (error instanceof SettlementRefusedError) return 'refused';
  // Failed for good (the outbox has nothing left to finish), though the payer is told to retry.
  if (error instanceof SettlementRevertedError) return 'failed';
  return error instanceof SettlementUnavailableError ? 'unavailable' : 'failed';
}

/** `paymentInFlight`: whether a transaction sent for the debt may still pay it (see SettlementUnavailableError). */
function unavailable(error: unknown, paymentInFlight: boolean): SettlementUnavailableError {
  if (error instanceof SettlementUnavailableError) return error;
  return new SettlementUnavailableError(
    `the chain cannot settle right now (${chainErrorReason(error)}); retry shortly`,
    paymentInFlight,
    { cause: error },
  );
}
