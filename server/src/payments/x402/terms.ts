import {
  encodePaymentRequiredHeader,
  encodePaymentResponseHeader,
  PAYMENT_REQUIRED_CACHE_CONTROL,
} from '@x402/core/http';
import type {
  Network,
  PaymentRequired,
  PaymentRequirements,
  PaymentRequirementsV1,
  SettleResponse,
} from '@x402/core/types';
import { EVM_NETWORK_CHAIN_ID_MAP } from '@x402/evm/v1';
import { declareEip2612GasSponsoringExtension } from '@x402/extensions';
import { declarePaymentIdentifierExtension, PAYMENT_IDENTIFIER } from '@x402/extensions/payment-identifier';
import { SIGN_IN_WITH_X } from '@x402/extensions/sign-in-with-x';
import type { Address } from 'viem';
import { GatewayError } from '../../errors.js';
import { signInChallenge } from './sign-in.js';

/**
 * What this gateway accepts as payment: one token, on one chain, to one treasury, by the `exact`
 * scheme (EIP-3009; an ERC-7710 delegation too) and by `upto` when its facilitator settles in process.
 */
export interface X402Terms {
  /** CAIP-2, e.g. `eip155:8453`. */
  network: Network;
  chainId: number;
  /** The USDC contract. */
  asset: Address;
  payTo: Address;
  /** The token's EIP-712 domain, which the payer signs under: the requirements' `extra`. */
  domain: { name: string; version: string };
  /** How long a signed proof stays valid; also bounds how long an unconfirmed settlement can stay open. */
  maxTimeoutSeconds: number;
  /** `upto` (Permit2), settled after the request: offered only when set. */
  upto?: UptoTerms;
  /**
   * `exact` paid by an ERC-7710 delegation to this redeemer (the gateway's relayer,
   * `extra.facilitatorAddresses`): offered only when set.
   */
  delegationRedeemer?: Address;
}

export interface UptoTerms {
  /** The only sender that may settle a permit: the gateway's relayer (`extra.facilitatorAddress`). */
  facilitator: Address;
  /** How long a permit stays valid: the longest a request can run, and its settlement after it. */
  maxTimeoutSeconds: number;
}

export type X402Version = 1 | 2;

/** A 402 answer: what the payer must pay now, and why the request was not let through. */
export interface PaymentDemand {
  /** USDC atomic units; 0 when the payer is not known yet (a zero-value proof names it). */
  amountAtomic: bigint;
  /**
   * The least maximum an `upto` permit must allow (what the payer owes, when known, and the request's
   * worst case), when `upto` is offered beside `exact` for this request.
   */
  uptoAtomic?: bigint;
  reason: string;
  /** The served path: the x402 `resource`. */
  url: string;
  /** A v1 caller (it sent `X-PAYMENT`) gets a v1 body; the `PAYMENT-REQUIRED` header is always v2. */
  version?: X402Version;
  /** A settlement that was attempted and failed, echoed in the settlement response header. */
  failedSettlement?: SettleResponse;
  /**
   * The origin the caller reached, to which a sign-in challenge is bound; none when the caller
   * already signed in (its 402 states its debt) or when it is not known.
   */
  signInOrigin?: URL;
}

const SCHEME = 'exact';
const RESOURCE_DESCRIPTION =
  'OpenAI-compatible chat completion; an exact proof pays exactly what its payer owes for earlier completed requests, an upto permit pays that and this request at its exact cost once it completes';
const MIME_TYPE = 'application/json';

/** The `exact` requirements for `amountAtomic`: what a proof of that amount must match. */
export function paymentRequirements(terms: X402Terms, amountAtomic: bigint): PaymentRequirements {
  return {
    scheme: SCHEME,
    network: terms.network,
    asset: terms.asset,
    amount: amountAtomic.toString(),
    payTo: terms.payTo,
    maxTimeoutSeconds: terms.maxTimeoutSeconds,
    extra: { ...terms.domain },
  };
}

/** The `upto` requirements for a maximum of `amountAtomic` (or, settling, that amount): Permit2 through x402's proxy. */
export function uptoRequirements(terms: X402Terms, amountAtomic: bigint): PaymentRequirements {
  if (!terms.upto) throw new Error('upto is not offered');
  return {
    scheme: 'upto',
    network: terms.network,
    asset: terms.asset,
    amount: amountAtomic.toString(),
    payTo: terms.payTo,
    maxTimeoutSeconds: terms.upto.maxTimeoutSeconds,
    extra: { ...terms.domain, assetTransferMethod: 'permit2', facilitatorAddress: terms.upto.facilitator },
  };
}

/** The `exact` requirements paid by an ERC-7710 delegation that the redeemer can redeem for `amountAtomic`. */
export function delegationRequirements(terms: X402Terms, amountAtomic: bigint): PaymentRequirements {
  const exact = paymentRequirements(terms, amountAtomic);
  return {
    ...exact,
    extra: {
      ...exact.extra,
      assetTransferMethod: 'erc7710',
      facilitatorAddresses: terms.delegationRedeemer ? [terms.delegationRedeemer] : [],
    },
  };
}

/** The x402 v2 PaymentRequired of a demand. */
function paymentRequired(terms: X402Terms, demand: PaymentDemand): PaymentRequired {
  return {
    x402Version: 2,
    error: demand.reason,
    resource: { url: demand.url, description: RESOURCE_DESCRIPTION, mimeType: MIME_TYPE },
    accepts: [
      paymentRequirements(terms, demand.amountAtomic),
      ...(terms.delegationRedeemer ? [delegationRequirements(terms, demand.amountAtomic)] : []),
      ...(terms.upto && demand.uptoAtomic !== undefined ? [uptoRequirements(terms, demand.uptoAtomic)] : []),
    ],
    extensions: {
      [PAYMENT_IDENTIFIER]: declarePaymentIdentifierExtension(false),
      // An upto payer that has not approved Permit2 signs an EIP-2612 permit the relayer submits with its permit.
      ...(terms.upto && demand.uptoAtomic !== undefined && declareEip2612GasSponsoringExtension()),
      ...(demand.signInOrigin && {
        [SIGN_IN_WITH_X]: signInChallenge(demand.signInOrigin, demand.url, terms.network),
      }),
    },
  };
}

/**
 * The 402 of a demand. Its body is the gateway's envelope (`data: null`, `error: {code, message}`,
 * `meta`) with the x402 fields beside it (`x402Version`, `accepts`, `resource`); x402's own `error`
 * string cannot share the envelope's `error` object, so the exact PaymentRequired, reason included,
 * is the base64 JSON of the `PAYMENT-REQUIRED` header, which is what v2 clients read.
 */
export function paymentRequiredError(terms: X402Terms, demand: PaymentDemand): GatewayError {
  const required = paymentRequired(terms, demand);
  const headers: Record<string, string> = {
    'PAYMENT-REQUIRED': encodePaymentRequiredHeader(required),
    'cache-control': PAYMENT_REQUIRED_CACHE_CONTROL,
  };
  if (demand.failedSettlement)
    headers[settlementHeaderName(demand.version ?? 2)] = encodePaymentResponseHeader(demand.failedSettlement);
  const envelopeFields =
    demand.version === 1
      ? { x402Version: 1, accepts: [v1Requirements(terms, demand, required)] }
      : {
          x402Version: required.x402Version,
          accepts: required.accepts,
          resource: required.resource,
          extensions: required.extensions,
        };
  return new GatewayError('payment_required', demand.reason, { headers, envelopeFields });
}

/** The header carrying the settlement result: `PAYMENT-RESPONSE` (v2) or `X-PAYMENT-RESPONSE` (v1). */
function settlementHeaderName(version: X402Version): string {
  return version === 1 ? 'X-PAYMENT-RESPONSE' : 'PAYMENT-RESPONSE';
}

export function settlementHeaders(version: X402Version, settlement: SettleResponse): Record<string, string> {
  return { [settlementHeaderName(version)]: encodePaymentResponseHeader(settlement) };
}

/** v1 names the networks it knows (`base`); others keep their CAIP-2 name. */
export function v1NetworkName(terms: X402Terms): string {
  const named = Object.entries(EVM_NETWORK_CHAIN_ID_MAP).find(([, chainId]) => chainId === terms.chainId);
  return named?.[0] ?? terms.network;
}

function v1Requirements(
  terms: X402Terms,
  demand: PaymentDemand,
  required: PaymentRequired,
): PaymentRequirementsV1 {
  return {
    scheme: SCHEME,
    network: v1NetworkName(terms) as Network,
    maxAmountRequired: demand.amountAtomic.toString(),
    resource: demand.url,
    description: required.resource.description ?? RESOURCE_DESCRIPTION,
    mimeType: MIME_TYPE,
    outputSchema: {},
    payTo: terms.payTo,
    maxTimeoutSeconds: terms.maxTimeoutSeconds,
    asset: terms.asset,
    extra: { ...terms.domain },
  };
}
