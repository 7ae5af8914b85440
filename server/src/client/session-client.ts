import { type Delegation, type MetaMaskSmartAccount, ROOT_AUTHORITY } from '@metamask/smart-accounts-kit';
import {
  createCaveatBuilder,
  generateSalt,
  SIGNABLE_DELEGATION_TYPED_DATA,
  toDelegationStruct,
} from '@metamask/smart-accounts-kit/utils';
import { type Address, type Hex, isAddressEqual, pad } from 'viem';
import { type AuthorizedSession, type RevokedSession, type SessionTerms, SIGNATURE_HEADER } from './types.js';

/** A delegation not signed yet (its `signature` is `0x`). */
export type UnsignedDelegation = Omit<Delegation, 'signature'> & { signature: '0x' };

/** An error answer of the gateway: its status and the envelope's `error`. */
export class GatewayError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly field?: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
    this.name = 'GatewayError';
  }
}

interface Transport {
  /** Default: the global fetch. */
  fetch?: typeof fetch;
}

/** `GET /v1/authorize`: what the gateway accepts and whom to delegate to. */
/** How far a payer's clock may run ahead of the gateway's without its period cap starting "in the future". */
const CLOCK_SKEW_SECONDS = 60;

export async function fetchTerms(gatewayUrl: string, transport: Transport = {}): Promise<SessionTerms> {
  return call<SessionTerms>(transport, `${base(gatewayUrl)}/v1/authorize`, { method: 'GET' });
}

export interface SessionDelegationOptions {
  /** What the delegation names: `GET /v1/authorize`'s terms, or just these fields of them. */
  terms: Pick<SessionTerms, 'environment' | 'treasury' | 'sessionKey'> & {
    usdc: Pick<SessionTerms['usdc'], 'address'>;
  };
  /** The payer: a MetaMask smart account, or its address. */
  smartAccount?: Pick<MetaMaskSmartAccount, 'address'>;
  delegator?: Address;
  /** The most USDC (atomic units) the gateway may ever transfer; per period when `period` is given. */
  cap: bigint;
  /**
   * Makes `cap` renew every `seconds` (ERC20PeriodTransferEnforcer), counting from `startsAt` (default
   * a minute ago: the gateway refuses a start in its future, and clocks differ).
   */
  period?: { seconds: number; startsAt?: Date };
  expiresAt: Date;
  /** Default: 32 random bytes. A delegation authorizes one session only; a new one needs a new salt. */
  salt?: Hex;
}

/**
 * The delegation the gateway's policy asks for: from the payer's smart account to the session key,
 * USDC transfers to the treasury only, capped, expiring, redeemable by the session key only. Three
 * caveats, the fewest that pin all of that, since each one is gas on every settlement: the amount
 * enforcer pins the token (the call's target) and the `transfer` selector, AllowedCalldataEnforcer
 * the recipient, TimestampEnforcer the expiry. No RedeemerEnforcer: the DelegationManager lets only
 * the delegate redeem (`InvalidDelegate`). No ValueLteEnforcer: a call carrying ETH to USDC's
 * `transfer`, which is not payable, reverts.
 */
export function buildSessionDelegation(options: SessionDelegationOptions): UnsignedDelegation {
  const { terms } = options;
  const delegator = options.smartAccount?.address ?? options.delegator;
  if (!delegator) throw new Error('buildSessionDelegation needs a smartAccount or a delegator address');
  const startsAt = Math.floor(Date.now() / 1000) - CLOCK_SKEW_SECONDS;
  const builder = createCaveatBuilder(terms.environment);
  if (options.period)
    builder.addCaveat('erc20PeriodTransfer', {
      tokenAddress: terms.usdc.address,
      periodAmount: options.cap,
      periodDuration: options.period.seconds,
      startDate: options.period.startsAt ? Math.floor(options.period.startsAt.getTime() / 1000) : startsAt,
    });
  else builder.addCaveat('erc20TransferAmount', { tokenAddress: terms.usdc.address, maxAmount: options.cap });
  builder
    .addCaveat('allowedCalldata', { startIndex: 4, value: pad(terms.treasury, { size: 32 }) })
    .addCaveat('timestamp', {
      afterThreshold: 0,
      beforeThreshold: Math.floor(options.expiresAt.getTime() / 1000),
    });
  return {
    delegate: terms.sessionKey,
    delegator,
    authority: ROOT_AUTHORITY,
    caveats: builder.build(),
    salt: options.salt ?? generateSalt(),
    signature: '0x',
  };
}

/**
 * Signs the delegation with the smart account: its raw signature when deployed, an ERC-6492 one
 * when not (the gateway then deploys the account before its first settlement).
 */
export async function signSessionDelegation(
  smartAccount: MetaMaskSmartAccount,
  delegation: UnsignedDelegation,
  terms: Pick<SessionTerms, 'domain'>,
): Promise<Hex> {
  if (await smartAccount.isDeployed())
    return smartAccount.signDelegation({ delegation, chainId: terms.domain.chainId });
  return smartAccount.signTypedData({
    domain: terms.domain,
    types: SIGNABLE_DELEGATION_TYPED_DATA,
    primaryType: 'Delegation',
    message: toDelegationStruct(delegation),
  });
}

export interface AuthorizeSessionOptions extends Transport {
  gatewayUrl: string;
  delegation: Omit<Delegation, 'signature'> & { signature?: Hex };
  /** The delegation's EIP-712 signature by the smart account. */
  signature: Hex;
  /** Default: the chain of the delegation's terms, fetched from the gateway. */
  chainId?: number;
}

/** `POST /v1/authorize`: turns a signed delegation into a session and its access token. */
export async function authorizeSession(options: AuthorizeSessionOptions): Promise<AuthorizedSession> {
  const chainId = options.chainId ?? (await fetchTerms(options.gatewayUrl, options)).chainId;
  const { signature: _unsigned, ...delegation } = options.delegation;
  return call<AuthorizedSession>(options, `${base(options.gatewayUrl)}/v1/authorize`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', [SIGNATURE_HEADER]: options.signature },
    body: JSON.stringify({ chainId, delegation }),
  });
}

export interface AuthorizeWithSmartAccountOptions
  extends Transport,
    Omit<SessionDelegationOptions, 'terms' | 'delegator'> {
  gatewayUrl: string;
  smartAccount: MetaMaskSmartAccount;
}

/** Everything at once: fetch the terms, build the delegation, sign it with the smart account, authorize. */
export async function authorizeWithSmartAccount(
  options: AuthorizeWithSmartAccountOptions,
): Promise<AuthorizedSession> {
  const terms = termsOfAccount(await fetchTerms(options.gatewayUrl, options), options.smartAccount);
  const delegation = buildSessionDelegation({ ...options, terms });
  const signature = await signSessionDelegation(options.smartAccount, delegation, terms);
  return authorizeSession({ ...options, delegation, signature, chainId: terms.chainId });
}

/**
 * The gateway's terms, held against the Delegation Framework deployment the payer's own account uses:
 * the caveats are built on that deployment's enforcers and signed for its DelegationManager. A gateway
 * (or a page pretending to be one) naming other contracts, which might restrict nothing, is refused.
 */
export function termsOfAccount(
  terms: SessionTerms,
  account: Pick<MetaMaskSmartAccount, 'environment'>,
): SessionTerms {
  const own = account.environment;
  const differs = (named: Address, expected: Address | undefined) =>
    expected === undefined || !isAddressEqual(named, expected);
  if (
    differs(terms.delegationManager, own.DelegationManager) ||
    differs(terms.domain.verifyingContract, own.DelegationManager)
  )
    throw new Error(
      `the gateway names DelegationManager ${terms.domain.verifyingContract}, not the smart account's ${own.DelegationManager}`,
    );
  for (const [name, address] of Object.entries(terms.enforcers))
    if (differs(address, own.caveatEnforcers[name]))
      throw new Error(
        `the gateway names ${name} ${address}, not the smart account's ${own.caveatEnforcers[name]}`,
      );
  return { ...terms, environment: own };
}

/** `DELETE /v1/authorize`: ends the session of `token`; later requests with it get 401. */
export async function revokeSession(
  options: Transport & { gatewayUrl: string; token: string },
): Promise<RevokedSession> {
  return call<RevokedSession>(options, `${base(options.gatewayUrl)}/v1/authorize`, {
    method: 'DELETE',
    headers: { authorization: `Bearer ${options.token}` },
  });
}

async function call<T>(transport: Transport, url: string, init: RequestInit): Promise<T> {
  const response = await (transport.fetch ?? fetch)(url, init);
  const body = (await response.json().catch(() => null)) as {
    data: T | null;
    error: { code: string; message: string; field?: string; details?: Record<string, unknown> } | null;
  } | null;
  if (response.ok && body?.data) return body.data;
  const error = body?.error;
  throw new GatewayError(
    response.status,
    error?.code ?? 'http_error',
    error?.message ?? `the gateway answered ${response.status}`,
    error?.field,
    error?.details,
  );
}

function base(gatewayUrl: string): string {
  return gatewayUrl.replace(/\/+$/, '');
}
