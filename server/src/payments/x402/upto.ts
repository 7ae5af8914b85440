import { z } from '@x402/core/schemas';
import type { PaymentPayload, PaymentRequirements } from '@x402/core/types';
import { PERMIT2_ADDRESS, x402UptoPermit2ProxyAddress } from '@x402/evm';
import { type Address, getAddress, type Hex, isAddressEqual, numberToHex } from 'viem';
import type { UptoProof } from './proof.js';
import { uptoRequirements, type X402Terms } from './terms.js';

/**
 * An x402 `upto` proof: a Permit2 transfer of at most `maxAtomic` that the payer signed to the
 * treasury, which only the facilitator it names can settle, for any amount up to that maximum.
 */
export interface UptoPermit {
  from: Address;
  token: Address;
  maxAtomic: bigint;
  spender: Address;
  /** Permit2's nonces are the owner's, across tokens (unordered: any unused one). */
  nonce: bigint;
  /** Last second at which Permit2 accepts it. */
  deadline: bigint;
  to: Address;
  facilitator: Address;
  validAfter: bigint;
}

const uint = z.string().regex(/^\d{1,78}$/, 'must be a decimal integer string');
const address = z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 0x-prefixed 20-byte address');
export const uptoPayloadSchema = z.object({
  signature: z.string().regex(/^0x(?:[0-9a-fA-F]{2})+$/, 'must be 0x-prefixed hex'),
  permit2Authorization: z.object({
    from: address,
    permitted: z.object({ token: address, amount: uint }),
    spender: address,
    nonce: uint,
    deadline: uint,
    witness: z.object({ to: address, facilitator: address, validAfter: uint }),
  }),
});
export type UptoPayload = z.infer<typeof uptoPayloadSchema>;

export function uptoPermit(payload: UptoPayload): UptoPermit {
  const { permit2Authorization: permit } = payload;
  return {
    from: getAddress(permit.from),
    token: getAddress(permit.permitted.token),
    maxAtomic: BigInt(permit.permitted.amount),
    spender: getAddress(permit.spender),
    nonce: BigInt(permit.nonce),
    deadline: BigInt(permit.deadline),
    to: getAddress(permit.witness.to),
    facilitator: getAddress(permit.witness.facilitator),
    validAfter: BigInt(permit.witness.validAfter),
  };
}

/**
 * The replay guard's key of a Permit2 authorization: its nonce as Permit2 keeps it (per owner, in
 * Permit2, whatever the token), so `asset` is Permit2's address.
 */
export function permit2NonceKey(permit: UptoPermit): { asset: Address; payer: Address; nonce: Hex } {
  return { asset: PERMIT2_ADDRESS, payer: permit.from, nonce: numberToHex(permit.nonce, { size: 32 }) };
}

/** Whether a replay guard's row is a Permit2 authorization (an `upto` proof). */
export function isPermit2Authorization(asset: Address): boolean {
  return isAddressEqual(asset, PERMIT2_ADDRESS);
}

// Clocks of payer, gateway and chain differ a little.
const VALIDITY_SLACK_SECONDS = 60n;

/** Why the permit cannot pay under these terms, in words, or undefined when it may (the facilitator checks the rest). */
export function uptoMismatch(
  permit: UptoPermit,
  accepted: PaymentRequirements,
  terms: X402Terms,
  nowSeconds: bigint,
): string | undefined {
  if (!terms.upto) return 'this gateway does not accept the "upto" scheme; pay by "exact"';
  if (!isAddressEqual(permit.token, terms.asset))
    return `the permit transfers token ${permit.token}; this gateway accepts ${terms.asset} (USDC)`;
  if (!isAddressEqual(permit.to, terms.payTo))
    return `the permit pays ${permit.to}; payments go to the treasury ${terms.payTo}`;
  if (!isAddressEqual(permit.spender, x402UptoPermit2ProxyAddress))
    return `the permit's spender is ${permit.spender}; x402's upto proxy ${x402UptoPermit2ProxyAddress} is`;
  if (!isAddressEqual(permit.facilitator, terms.upto.facilitator))
    return `the permit names facilitator ${permit.facilitator}; this gateway settles from ${terms.upto.facilitator} (extra.facilitatorAddress)`;
  if (accepted.amount !== permit.maxAtomic.toString())
    return `the proof accepts an amount of ${accepted.amount.slice(0, 80)} but its permit allows ${permit.maxAtomic}`;
  const latest = nowSeconds + BigInt(terms.upto.maxTimeoutSeconds) + VALIDITY_SLACK_SECONDS;
  if (permit.deadline > latest)
    return `the permit stays valid until ${permit.deadline}; it must expire within ${terms.upto.maxTimeoutSeconds} seconds`;
  // Settled once the request completes: a permit that cannot outlive the request would pay nothing.
  if (permit.deadline < nowSeconds + BigInt(terms.upto.maxTimeoutSeconds) - VALIDITY_SLACK_SECONDS)
    return `the permit expires at ${permit.deadline}, before this request can complete; sign one valid for ${terms.upto.maxTimeoutSeconds} seconds`;
  return undefined;
}

/** The proof as the facilitator verifies it (against its maximum) or settles it (for `amountAtomic`). */
export function uptoFacilitatorInput(
  proof: Pick<UptoProof, 'payload' | 'accepted' | 'eip2612'>,
  terms: X402Terms,
  amountAtomic: bigint,
): { payload: PaymentPayload; requirements: PaymentRequirements } {
  const { payload, accepted, eip2612 } = proof;
  return {
    payload: {
      x402Version: 2,
      accepted,
      payload,
      // x402's facilitator checks its owner, token, amount and deadline, and submits it with the permit.
      ...(eip2612 !== undefined && { extensions: { eip2612GasSponsoring: eip2612 } }),
    },
    requirements: uptoRequirements(terms, amountAtomic),
  };
}
