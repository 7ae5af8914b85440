import type { SmartAccountsEnvironment } from '@metamask/smart-accounts-kit';
import type { Address, Hex } from 'viem';

/**
 * The header carrying the delegation's signature on POST /v1/authorize. Here, not in
 * session-client.ts, so the gateway reads it without loading the client and the kit with it.
 */
export const SIGNATURE_HEADER = 'x-authorization-signature';

/** The caveat enforcers a session delegation may use, by their name in the Delegation Framework. */
export type AcceptedEnforcer =
  | 'ERC20TransferAmountEnforcer'
  | 'ERC20PeriodTransferEnforcer'
  | 'AllowedCalldataEnforcer'
  | 'TimestampEnforcer'
  | 'RedeemerEnforcer'
  | 'ValueLteEnforcer'
  | 'NonceEnforcer';

/**
 * What a client needs to build and sign a session delegation: `GET /v1/authorize` (envelope
 * `data`), also published as `gateway.authorize` in `GET /v1/models`. Amounts are decimal strings.
 */
export interface SessionTerms {
  chainId: number;
  /** CAIP-2, e.g. `eip155:8453`. */
  network: `eip155:${number}`;
  /** The delegate (and redeemer) to name: the gateway's session key. */
  sessionKey: Address;
  /** Where every transfer goes. */
  treasury: Address;
  usdc: { address: Address; name: string; version: string; decimals: number };
  delegationManager: Address;
  /** The EIP-712 domain a delegation is signed in. */
  domain: { name: 'DelegationManager'; version: '1'; chainId: number; verifyingContract: Address };
  /** The enforcers a delegation may use, by name. */
  enforcers: Record<AcceptedEnforcer, Address>;
  /** The whole Delegation Framework deployment (for building smart accounts on chains the kit does not know). */
  environment: SmartAccountsEnvironment;
  policy: {
    authority: Hex;
    /** One of them, on USDC, is required. */
    amountCaps: ['ERC20TransferAmountEnforcer', 'ERC20PeriodTransferEnforcer'];
    minCapAtomic: string;
    minPeriodSeconds: number;
    /** Recommended, and when present it must name the treasury: AllowedCalldataEnforcer pinning the transfer recipient. */
    recipient: { enforcer: 'AllowedCalldataEnforcer'; startIndex: 4; value: Hex };
    /** Required: TimestampEnforcer whose `beforeThreshold` lies within these bounds from now. */
    expiry: { enforcer: 'TimestampEnforcer'; minSeconds: number; maxSeconds: number };
    /** Allowed: RedeemerEnforcer naming the session key, ValueLteEnforcer, NonceEnforcer at the delegator's nonce. */
    optional: ['RedeemerEnforcer', 'ValueLteEnforcer', 'NonceEnforcer'];
  };
}

/** The caps a session grants, as the gateway accepted them. */
export interface SessionLimits {
  token: Address;
  recipient: Address;
  /** ISO time after which the delegation cannot be redeemed. */
  expiresAt: string;
  /** Over the delegation's whole life, USDC atomic units (decimal string). */
  totalCapAtomic?: string;
  /** Per period, USDC atomic units (decimal string). */
  period?: { amountAtomic: string; periodSeconds: number; startsAt: string };
}

/** `POST /v1/authorize` 201, envelope `data`. */
export interface AuthorizedSession {
  /** The access token: `Authorization: Bearer <token>` (the OpenAI client's apiKey). */
  token: string;
  sessionId: string;
  /** The smart account, checksummed. */
  wallet: Address;
  /** ISO; the token expires then too. */
  expiresAt: string;
  limits: SessionLimits;
}

/** `DELETE /v1/authorize` 200, envelope `data`. */
export interface RevokedSession {
  sessionId: string;
  wallet: Address;
  revoked: true;
  /** What the payer still owes, USDC atomic units; collected later under the revoked delegation. */
  owedAtomic: string;
}
