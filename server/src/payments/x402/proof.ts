import type { IncomingHttpHeaders } from 'node:http';
import { decodePaymentSignatureHeader } from '@x402/core/http';
import { PaymentPayloadV1Schema, PaymentPayloadV2Schema, z } from '@x402/core/schemas';
import type { PaymentPayload, PaymentRequirements } from '@x402/core/types';
import { extractAndValidatePaymentIdentifier } from '@x402/extensions/payment-identifier';
import { type Address, getAddress, type Hex, isAddressEqual } from 'viem';
import { GatewayError } from '../../errors.js';
import { delegationNonce, type Erc7710Payload, erc7710PayloadSchema } from './erc7710.js';
import {
  delegationRequirements,
  paymentRequirements,
  v1NetworkName,
  type X402Terms,
  type X402Version,
} from './terms.js';
import { type UptoPayload, type UptoPermit, uptoPayloadSchema, uptoPermit } from './upto.js';

/** The EIP-3009 TransferWithAuthorization a proof carries, as the token will check it. */
export interface TransferAuthorization {
  from: Address;
  to: Address;
  value: bigint;
  validAfter: bigint;
  validBefore: bigint;
  nonce: Hex;
}

/** A payment proof read from a request: `PAYMENT-SIGNATURE` (x402 v2) or `X-PAYMENT` (v1). */
export interface PaymentProof {
  version: X402Version;
  /** The header it came in, for messages. */
  header: string;
  scheme: string;
  network: string;
  /** v2 only: the requirements the payer says it accepted. */
  accepted?: PaymentRequirements;
  /**
   * The scheme payload as read, and nothing else the client sent: an EIP-3009 signature and
   * authorization, or an ERC-7710 delegation (`assetTransferMethod: "erc7710"`).
   */
  payload: Eip3009Payload | Erc7710Payload;
  /**
   * Where the proof's nonce is kept, when not in the token: the DelegationManager of a delegation,
   * whose nonce is the hash of its permission context (a delegation proof is accepted once).
   */
  nonceKeeper?: Address;
  authorization: TransferAuthorization;
  /** v2 only: the payer's idempotency key (`payment-identifier` extension), when it sent one. */
  paymentId?: string;
}

/** An x402 v2 `upto` proof: a Permit2 permit for a maximum, settled at the request's cost once it completes. */
export interface UptoProof {
  version: 2;
  header: string;
  scheme: 'upto';
  network: string;
  accepted: PaymentRequirements;
  payload: UptoPayload;
  permit: UptoPermit;
  paymentId?: string;
  /** The payer's EIP-2612 permit for Permit2 (`eip2612GasSponsoring`), when it has not approved Permit2. */
  eip2612?: unknown;
}

export function isUptoProof(proof: PaymentProof | UptoProof): proof is UptoProof {
  return proof.scheme === 'upto' && 'permit' in proof;
}

const EIP2612_GAS_SPONSORING_KEY = 'eip2612GasSponsoring';

const PROOF_HEADERS: ReadonlyArray<{ name: string; version: X402Version }> = [
  { name: 'payment-signature', version: 2 },
  { name: 'x-payment', version: 1 },
];

const uint = z.string().regex(/^\d{1,78}$/, 'must be a decimal integer string');
const address = z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 0x-prefixed 20-byte address');
const eip3009Payload = z.object({
  signature: z.string().regex(/^0x(?:[0-9a-fA-F]{2})+$/, 'must be 0x-prefixed hex'),
  authorization: z.object({
    from: address,
    to: address,
    value: uint,
    validAfter: uint,
    validBefore: uint,
    nonce: z.string().regex(/^0x[0-9a-fA-F]{64}$/, 'must be 0x-prefixed 32 bytes'),
  }),
});
type Eip3009Payload = z.infer<typeof eip3009Payload>;

// A delegation proof names no expiry of its own: its settlement is given up after this long.
const MAX_DELEGATION_SECONDS = 600;

// Clocks of payer, gateway and chain differ a little; beyond this a proof outlives what the gateway asked for.
const VALIDITY_SLACK_SECONDS = 60n;

export function carriesProof(headers: IncomingHttpHeaders): boolean {
  return PROOF_HEADERS.some(({ name }) => headers[name] !== undefined);
}

/** Decodes the request's proof (v2 first); a header that is not one is 400 naming it. */
export function readProof(headers: IncomingHttpHeaders): PaymentProof | UptoProof {
  const found = PROOF_HEADERS.find(({ name }) => headers[name] !== undefined);
  if (!found) throw new GatewayError('validation_error', 'no PAYMENT-SIGNATURE or X-PAYMENT header');
  const header = found.name.toUpperCase();
  const invalid = (problem: string) =>
    new GatewayError('validation_error', `${header} ${problem}`, { field: header });
  const raw = headers[found.name];
  let decoded: unknown;
  try {
    decoded = decodePaymentSignatureHeader(String(raw));
  } catch {
    throw invalid('is not base64-encoded JSON');
  }
  const parsed = (found.version === 2 ? PaymentPayloadV2Schema : PaymentPayloadV1Schema).safeParse(decoded);
  if (!parsed.success)
    throw invalid(`is not an x402 v${found.version} payment payload: ${issueText(parsed.error)}`);
  const paymentIdOf = (payload: PaymentPayload) => {
    const identifier = extractAndValidatePaymentIdentifier(payload);
    if (!identifier.validation.valid)
      throw invalid(
        `extensions.payment-identifier is not valid: ${identifier.validation.errors?.[0] ?? 'invalid'} (an id is 16 to 128 letters, digits, - or _)`,
      );
    return identifier.id ?? undefined;
  };
  if (parsed.data.x402Version === 2 && parsed.data.accepted.scheme === 'upto') {
    const upto = uptoPayloadSchema.safeParse(parsed.data.payload);
    if (!upto.success)
      throw invalid(`does not carry an upto Permit2 authorization: ${issueText(upto.error)}`);
    const paymentId = paymentIdOf(parsed.data as PaymentPayload);
    return {
      version: 2,
      header,
      scheme: 'upto',
      network: parsed.data.accepted.network,
      accepted: parsed.data.accepted as PaymentRequirements,
      payload: upto.data,
      permit: uptoPermit(upto.data),
      ...(paymentId !== undefined && { paymentId }),
      ...(parsed.data.extensions?.[EIP2612_GAS_SPONSORING_KEY] !== undefined && {
        eip2612: parsed.data.extensions[EIP2612_GAS_SPONSORING_KEY],
      }),
    };
  }
  if (parsed.data.x402Version === 2 && parsed.data.accepted.extra?.assetTransferMethod === 'erc7710') {
    const delegation = erc7710PayloadSchema.safeParse(parsed.data.payload);
    if (!delegation.success)
      throw invalid(`does not carry an ERC-7710 delegation: ${issueText(delegation.error)}`);
    const accepted = parsed.data.accepted as PaymentRequirements;
    if (!/^\d{1,78}$/.test(accepted.amount))
      throw invalid('accepted.amount must be a decimal integer string');
    if (!/^0x[0-9a-fA-F]{40}$/.test(accepted.payTo))
      throw invalid('accepted.payTo must be a 0x-prefixed 20-byte address');
    const paymentId = paymentIdOf(parsed.data as PaymentPayload);
    const now = BigInt(Math.floor(Date.now() / 1000));
    return {
      version: 2,
      header,
      scheme: accepted.scheme,
      network: accepted.network,
      accepted,
      payload: delegation.data,
      nonceKeeper: getAddress(delegation.data.delegationManager),
      // What the delegation moves, as the authorization it stands for: checked by simulating it.
      authorization: {
        from: getAddress(delegation.data.delegator),
        to: getAddress(accepted.payTo),
        value: BigInt(accepted.amount),
        validAfter: 0n,
        validBefore: now + BigInt(Math.max(0, Math.min(accepted.maxTimeoutSeconds, MAX_DELEGATION_SECONDS))),
        nonce: delegationNonce(delegation.data),
      },
      ...(paymentId !== undefined && { paymentId }),
    };
  }
  // x402's facilitator verifies a Permit2 authorization in place of an EIP-3009 one beside it,
  // whose `from`, signed by no one, would then be taken for the payer.
  if ('permit2Authorization' in parsed.data.payload)
    throw invalid(
      'carries a Permit2 authorization; this gateway accepts them by the "upto" scheme, and EIP-3009 transferWithAuthorization by "exact"',
    );
  const eip3009 = eip3009Payload.safeParse(parsed.data.payload);
  if (!eip3009.success)
    throw invalid(`does not carry an EIP-3009 authorization: ${issueText(eip3009.error)}`);
  const { authorization } = eip3009.data;
  const common = {
    version: found.version,
    header,
    payload: eip3009.data,
    authorization: {
      from: getAddress(authorization.from),
      to: getAddress(authorization.to),
      value: BigInt(authorization.value),
      validAfter: BigInt(authorization.validAfter),
      validBefore: BigInt(authorization.validBefore),
      nonce: authorization.nonce.toLowerCase() as Hex,
    },
  };
  if (parsed.data.x402Version === 2) {
    const paymentId = paymentIdOf(parsed.data as PaymentPayload);
    return {
      ...common,
      ...(paymentId !== undefined && { paymentId }),
      scheme: parsed.data.accepted.scheme,
      network: parsed.data.accepted.network,
      accepted: parsed.data.accepted as PaymentRequirements,
    };
  }
  return { ...common, scheme: parsed.data.scheme, network: parsed.data.network };
}

/**
 * Why the proof cannot pay under these terms, in words, or undefined when it may (the facilitator
 * then checks the signature, the amount against the authorization and the validity window).
 */
export function proofMismatch(proof: PaymentProof, terms: X402Terms, nowSeconds: bigint): string | undefined {
  const { authorization, accepted } = proof;
  if (proof.scheme !== 'exact')
    return `the proof uses the "${quoted(proof.scheme)}" scheme; this gateway accepts "exact"`;
  const networks = proof.version === 1 ? [terms.network, v1NetworkName(terms)] : [terms.network];
  if (!networks.includes(proof.network))
    return `the proof pays on network ${quoted(proof.network)}; this gateway accepts ${terms.network}`;
  if (accepted && !sameAddress(accepted.asset, terms.asset))
    return `the proof pays in asset ${quoted(accepted.asset)}; this gateway accepts ${terms.asset} (USDC)`;
  if (
    !isAddressEqual(authorization.to, terms.payTo) ||
    (accepted && !sameAddress(accepted.payTo, terms.payTo))
  )
    return `the proof pays ${authorization.to}; payments go to the treasury ${terms.payTo}`;
  if (accepted && accepted.amount !== authorization.value.toString())
    return `the proof accepts an amount of ${quoted(accepted.amount)} but its authorization transfers ${authorization.value}`;
  const latest = nowSeconds + BigInt(terms.maxTimeoutSeconds) + VALIDITY_SLACK_SECONDS;
  if (authorization.validBefore > latest)
    return `the authorization stays valid until ${authorization.validBefore}; it must expire within ${terms.maxTimeoutSeconds} seconds`;
  return undefined;
}

/**
 * The proof as the v2 facilitator verifies it, with the requirements it must meet: what this gateway
 * asks, for the amount the authorization transfers. A v1 proof's EIP-3009 payload is the same in v2.
 */
export function facilitatorInput(
  proof: PaymentProof,
  terms: X402Terms,
): { payload: PaymentPayload; requirements: PaymentRequirements } {
  const amount = proof.authorization.value;
  const requirements = proof.nonceKeeper
    ? delegationRequirements(terms, amount)
    : paymentRequirements(terms, amount);
  const accepted = proof.accepted ?? requirements;
  return { payload: { x402Version: 2, accepted, payload: proof.payload }, requirements };
}

/**
 * A client's string as a refusal quotes it (in its message and the PAYMENT-REQUIRED header): cut
 * past the length of any value it could rightly hold (an amount of 2^256, a CAIP-2 network), so a
 * long one cannot swell the answer's headers past what proxies and clients read.
 */
function quoted(value: string): string {
  return value.length <= QUOTED_LENGTH ? value : `${value.slice(0, QUOTED_LENGTH)}…`;
}

const QUOTED_LENGTH = 80;

/** Whether `given`, a string from a client or a facilitator, is the address `expected`. */
export function sameAddress(given: string, expected: Address): boolean {
  return /^0x[0-9a-fA-F]{40}$/.test(given) && isAddressEqual(given as Address, expected);
}

function issueText(error: z.ZodError): string {
  const issue = error.issues[0];
  if (!issue) return 'invalid';
  const path = issue.path.join('.');
  return path ? `${path} ${issue.message}` : issue.message;
}
