import { DelegationManager } from '@metamask/delegation-abis';
import { z } from '@x402/core/schemas';
import type { PaymentRequirements, SettleResponse, VerifyResponse } from '@x402/core/types';
import {
  type Address,
  BaseError,
  decodeAbiParameters,
  encodeFunctionData,
  encodePacked,
  erc20Abi,
  getAddress,
  type Hash,
  type Hex,
  isAddressEqual,
  keccak256,
} from 'viem';
import {
  BroadcastError,
  type ChainClient,
  cappedGasLimit,
  DELEGATIONS_ABI_TYPE,
  delegatorCode,
  GasCapExceededError,
  isTransportFailure,
  NONCE_ATTEMPTS,
  paysTreasury,
  ROOT_AUTHORITY,
  revertReason,
  SINGLE_DEFAULT_MODE,
} from '../chain/index.js';

/**
 * x402 `exact` with `assetTransferMethod: "erc7710"`: the proof is a delegation (ERC-7710, the
 * MetaMask Delegation Framework) that lets the facilitator redeem a transfer of the amount from the
 * payer's smart account. Verified by simulating that redemption from the relayer, settled by
 * sending it.
 */
export const erc7710PayloadSchema = z.object({
  delegationManager: z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 0x-prefixed 20-byte address'),
  permissionContext: z.string().regex(/^0x(?:[0-9a-fA-F]{2})+$/, 'must be non-empty 0x-prefixed hex'),
  delegator: z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 0x-prefixed 20-byte address'),
});
export type Erc7710Payload = z.infer<typeof erc7710PayloadSchema>;

export function isErc7710Payload(payload: unknown): payload is Erc7710Payload {
  return typeof payload === 'object' && payload !== null && 'permissionContext' in payload;
}

/** The replay guard's key of a delegation proof: it is accepted once, whatever it allows. */
export function delegationNonce(payload: Erc7710Payload): Hex {
  return keccak256(payload.permissionContext as Hex);
}

// Each hop is one more signature check and caveat set in every settlement the relayer pays for.
const MAX_CHAIN_LENGTH = 2;

/** The redemption that pays `amountAtomic` of `requirements.asset` to `requirements.payTo`. */
function redemption(payload: Erc7710Payload, requirements: PaymentRequirements): { to: Address; data: Hex } {
  const transfer = encodeFunctionData({
    abi: erc20Abi,
    functionName: 'transfer',
    args: [getAddress(requirements.payTo), BigInt(requirements.amount)],
  });
  return {
    to: getAddress(payload.delegationManager),
    data: encodeFunctionData({
      abi: DelegationManager,
      functionName: 'redeemDelegations',
      args: [
        [payload.permissionContext as Hex],
        [SINGLE_DEFAULT_MODE],
        [encodePacked(['address', 'uint256', 'bytes'], [getAddress(requirements.asset), 0n, transfer])],
      ],
    }),
  };
}

const invalid = (payer: string, invalidReason: string, invalidMessage: string): VerifyResponse => ({
  isValid: false,
  invalidReason,
  invalidMessage,
  payer,
});

/**
 * Why the delegation chain cannot be redeemed at a bounded cost, or undefined: the framework's
 * DelegationManager; at most MAX_CHAIN_LENGTH delegations, the first to the relayer, the last from
 * the payer (the root); every delegator a MetaMask smart account of the framework and every caveat
 * one of its enforcers. A payer choosing its own contracts could burn the relayer's gas in each
 * settlement (see gas-caps.ts); the gas cap bounds what the known ones may cost.
 */
async function unredeemable(
  chain: ChainClient,
  payload: Erc7710Payload,
): Promise<VerifyResponse | undefined> {
  const payer = getAddress(payload.delegator);
  if (!isAddressEqual(getAddress(payload.delegationManager), chain.environment.DelegationManager))
    return invalid(
      payer,
      'invalid_delegation_manager',
      `the delegation is managed by ${payload.delegationManager}; this gateway redeems through ${chain.environment.DelegationManager}`,
    );
  let delegations: ReadonlyArray<{
    delegate: Address;
    delegator: Address;
    authority: Hex;
    caveats: ReadonlyArray<{ enforcer: Address }>;
  }>;
  try {
    [delegations] = decodeAbiParameters(DELEGATIONS_ABI_TYPE, payload.permissionContext as Hex);
  } catch {
    return invalid(
      payer,
      'invalid_permission_context',
      'permissionContext is not an ABI-encoded delegation chain',
    );
  }
  const leaf = delegations[0];
  const root = delegations.at(-1);
  if (!leaf || !root || delegations.length > MAX_CHAIN_LENGTH)
    return invalid(
      payer,
      'invalid_permission_context',
      `the delegation chain holds ${delegations.length} delegations; this gateway redeems 1 to ${MAX_CHAIN_LENGTH}`,
    );
  if (!isAddressEqual(root.delegator, payer) || root.authority.toLowerCase() !== ROOT_AUTHORITY)
    return invalid(payer, 'invalid_delegator', `the delegation chain does not start at the payer ${payer}`);
  // Only the relayer can redeem it, so nothing but the gateway's own settlement can spend it.
  if (!isAddressEqual(leaf.delegate, chain.relayer.address))
    return invalid(
      payer,
      'invalid_delegate',
      `the delegation is to ${leaf.delegate}; this gateway redeems as ${chain.relayer.address} (extra.facilitatorAddresses)`,
    );
  const known = new Set(
    Object.values(chain.environment.caveatEnforcers).map((address) => address.toLowerCase()),
  );
  const unknown = delegations.flatMap((d) => d.caveats).find((c) => !known.has(c.enforcer.toLowerCase()));
  if (unknown)
    return invalid(
      payer,
      'unsupported_caveat',
      `caveat enforcer ${unknown.enforcer} is not one of the Delegation Framework's; this gateway redeems delegations whose caveats it knows`,
    );
  for (const { delegator } of delegations)
    if ((await delegatorCode(chain.publicClient, delegator, chain.environment)) !== 'delegator')
      return invalid(
        payer,
        'unsupported_payer',
        `${delegator} is not a MetaMask smart account of the Delegation Framework (a HybridDeleGator or MultiSigDeleGator proxy, or an EIP-7702 stateless DeleGator)`,
      );
  return undefined;
}

/** Verifies by simulating the redemption from the relayer: it must go through, and pay the treasury. */
export async function verifyErc7710(
  chain: ChainClient,
  payload: Erc7710Payload,
  requirements: PaymentRequirements,
): Promise<VerifyResponse> {
  const payer = getAddress(payload.delegator);
  const refused = await unredeemable(chain, payload);
  if (refused) return refused;
  const call = redemption(payload, requirements);
  try {
    const gas = await chain.publicClient.estimateGas({ account: chain.relayer.address, ...call });
    cappedGasLimit('x402DelegationSettlement', gas);
  } catch (error) {
    if (error instanceof GasCapExceededError)
      return invalid(payer, 'gas_cap_exceeded', `its redemption ${error.message}`);
    if (isTransportFailure(error)) throw error;
    if (error instanceof BaseError)
      return invalid(
        payer,
        'invalid_delegation',
        `its redemption reverts: ${revertReason(error) ?? error.shortMessage}`,
      );
    throw error;
  }
  return { isValid: true, payer };
}

/**
 * Settles by sending the redemption from the relayer, announced through `onSubmitted` before its
 * broadcast; waits for the receipt. A refusal names no transaction; a node failure throws.
 */
export async function settleErc7710(
  chain: ChainClient,
  payload: Erc7710Payload,
  requirements: PaymentRequirements,
  onSubmitted: (txHash: Hash, raw?: Hex) => Promise<void>,
  confirmationTimeoutMs: number,
): Promise<SettleResponse> {
  const payer = getAddress(payload.delegator);
  const network = requirements.network;
  const verified = await verifyErc7710(chain, payload, requirements);
  if (!verified.isValid)
    return {
      success: false,
      transaction: '',
      network,
      payer,
      errorReason: verified.invalidReason,
      errorMessage: verified.invalidMessage,
    };
  const call = redemption(payload, requirements);
  const estimate = await chain.publicClient.estimateGas({ account: chain.relayer.address, ...call });
  const gas = cappedGasLimit('x402DelegationSettlement', estimate);
  let hash: Hash;
  for (let attempt = 1; ; attempt++) {
    try {
      hash = (await chain.relayer.submit({ ...call, gas }, (tx) => onSubmitted(tx.hash, tx.raw))).hash;
      break;
    } catch (error) {
      // Its nonce was taken: never mined, so the same redemption is signed under the next one.
      if (!(error instanceof BroadcastError && error.kind === 'nonce' && attempt < NONCE_ATTEMPTS))
        throw error;
    }
  }
  const receipt = await chain.relayer.waitForReceipt({ hash, timeout: confirmationTimeoutMs });
  const paid = paysTreasury(receipt, {
    token: getAddress(requirements.asset),
    payer,
    treasury: getAddress(requirements.payTo),
    amount: BigInt(requirements.amount),
  });
  return paid
    ? { success: true, transaction: hash, network, payer }
    : { success: false, transaction: hash, network, payer, errorReason: 'transaction_failed' };
}
