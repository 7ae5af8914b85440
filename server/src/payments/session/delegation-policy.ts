import type { Caveat, Delegation, SmartAccountsEnvironment } from '@metamask/smart-accounts-kit';
import {
  type Address,
  encodeFunctionData,
  erc20Abi,
  getAddress,
  type Hex,
  isAddressEqual,
  size,
  sliceHex,
} from 'viem';
import type { AcceptedEnforcer, SessionLimits } from '../../client/types.js';
import { validationError } from '../../errors.js';
import { decodeAcceptedCaveat, ROOT_AUTHORITY } from '../chain/index.js';

/** What the gateway accepts in a session delegation. */
export interface SessionPolicy {
  chainId: number;
  /** The gateway's session key: the delegate, and the redeemer when one is named. */
  sessionKey: Address;
  usdc: Address;
  treasury: Address;
  environment: SmartAccountsEnvironment;
  /** Latest accepted expiry, in seconds from now. */
  maxLifetimeSeconds: number;
  /** Smallest accepted cap (total or per period), USDC atomic units. */
  minCapAtomic: bigint;
}

/**
 * The enforcers a session delegation may use, by their name in the kit's environment. Required: an
 * amount cap on USDC and TimestampEnforcer (expiry). AllowedCalldataEnforcer (recipient) must name the
 * treasury when present, but is not required: MetaMask's ERC-7715 grants pin no recipient unless the
 * wallet honours the `payee` rule (docs/payments.md says why the cap is the bound that matters).
 * RedeemerEnforcer, ValueLteEnforcer and NonceEnforcer (the delegator's revocation switch) are the
 * rest of what those grants carry; every caveat costs each settlement about 23k gas
 * (test/chain/enforcer-gas.test.ts), so the gateway's own client asks for none of them.
 */
export const ACCEPTED_ENFORCERS: readonly AcceptedEnforcer[] = [
  'ERC20TransferAmountEnforcer',
  'ERC20PeriodTransferEnforcer',
  'AllowedCalldataEnforcer',
  'TimestampEnforcer',
  'RedeemerEnforcer',
  'ValueLteEnforcer',
  'NonceEnforcer',
];

export interface AcceptedDelegation {
  /** With every caveat's `args` emptied: args are not signed and no accepted enforcer reads them. */
  delegation: Omit<Delegation, 'signature'>;
  limits: SessionLimits;
  expiresAt: Date;
  /** The NonceEnforcer nonce the delegation names: it is redeemable only while the delegator's is this. */
  nonce?: bigint;
}

/** The shortest session worth authorizing, and the shortest cap period. */
export const MIN_SESSION_SECONDS = 60;
export const MIN_PERIOD_SECONDS = 60;
/** `transfer(address,uint256)` calldata: selector (4) + recipient word (32) + amount word (32). */
const RECIPIENT_WORD = { start: 4, end: 36 } as const;

/**
 * Checks a delegation against the policy: the gateway's key as delegate, root authority, and only
 * caveats that keep it a capped, expiring permission to transfer USDC (to the treasury, where the
 * recipient is pinned). Throws a 400 naming the field at fault. The signature is checked elsewhere.
 */
export function checkDelegation(
  policy: SessionPolicy,
  delegation: Omit<Delegation, 'signature'>,
  now: Date,
): AcceptedDelegation {
  if (!isAddressEqual(delegation.delegate, policy.sessionKey))
    throw validationError('delegation.delegate', `must be the gateway's session key ${policy.sessionKey}`);
  if (delegation.authority.toLowerCase() !== ROOT_AUTHORITY)
    throw validationError(
      'delegation.authority',
      `must be the root authority ${ROOT_AUTHORITY}: the gateway accepts no redelegated permission`,
    );

  const nowSeconds = Math.floor(now.getTime() / 1000);
  const enforcerNames = enforcerNamesByAddress(policy.environment);
  const transferCalldata = encodeFunctionData({
    abi: erc20Abi,
    functionName: 'transfer',
    args: [policy.treasury, 0n],
  });
  const seen = new Map<AcceptedEnforcer, number>();
  const limits: Partial<SessionLimits> = {};
  let expiresAtSeconds: number | undefined;
  let nonce: bigint | undefined;

  delegation.caveats.forEach((caveat, index) => {
    const field = `delegation.caveats[${index}]`;
    const name = enforcerNames.get(caveat.enforcer.toLowerCase());
    if (!name)
      throw validationError(
        `${field}.enforcer`,
        `is not an enforcer the gateway accepts; accepted: ${ACCEPTED_ENFORCERS.join(', ')} (GET /v1/authorize lists their addresses)`,
      );
    const decoded = decodeTerms(caveat, `${field}.terms`, name);
    const earlier = seen.get(name);
    if (earlier !== undefined && name !== 'AllowedCalldataEnforcer' && name !== 'TimestampEnforcer')
      throw validationError(
        `${field}.enforcer`,
        `repeats delegation.caveats[${earlier}]; give each cap once`,
      );
    seen.set(name, index);
    const terms = `${field}.terms`;

    switch (decoded.type) {
      case 'erc20TransferAmount':
        requireUsdc(policy, decoded.tokenAddress, terms);
        requireCap(policy, decoded.maxAmount, terms, 'maxAmount');
        limits.totalCapAtomic = decoded.maxAmount.toString();
        break;
      case 'erc20PeriodTransfer':
        requireUsdc(policy, decoded.tokenAddress, terms);
        requireCap(policy, decoded.periodAmount, terms, 'periodAmount');
        if (decoded.periodDuration < MIN_PERIOD_SECONDS)
          throw validationError(terms, `periodDuration must be at least ${MIN_PERIOD_SECONDS} seconds`);
        if (decoded.startDate > nowSeconds)
          throw validationError(
            terms,
            'startDate must not be in the future: the first settlement may be due now',
          );
        // The enforcer refuses every transfer under a zero start date (invalid-zero-start-date).
        if (decoded.startDate === 0) throw validationError(terms, 'startDate must be after 0');
        limits.period = {
          amountAtomic: decoded.periodAmount.toString(),
          periodSeconds: decoded.periodDuration,
          startsAt: new Date(decoded.startDate * 1000).toISOString(),
        };
        break;
      case 'allowedCalldata': {
        const end = decoded.startIndex + size(decoded.value);
        const expected =
          end <= RECIPIENT_WORD.end ? sliceHex(transferCalldata, decoded.startIndex, end) : undefined;
        // An empty value pins nothing, and the enforcer refuses it on chain (invalid-terms-size).
        if (
          size(decoded.value) === 0 ||
          expected === undefined ||
          expected.toLowerCase() !== decoded.value.toLowerCase()
        )
          throw validationError(
            terms,
            `must pin calldata of transfer(${policy.treasury}, amount) within its first ${RECIPIENT_WORD.end} bytes (startIndex ${RECIPIENT_WORD.start}, value: the treasury as a 32-byte word)`,
          );
        break;
      }
      case 'timestamp':
        if (decoded.afterThreshold > nowSeconds)
          throw validationError(terms, 'afterThreshold must not be in the future: the session starts now');
        if (decoded.beforeThreshold === 0) throw validationError(terms, 'beforeThreshold must set an expiry');
        if (decoded.beforeThreshold < nowSeconds + MIN_SESSION_SECONDS)
          throw validationError(
            terms,
            `beforeThreshold must be at least ${MIN_SESSION_SECONDS} seconds from now`,
          );
        if (decoded.beforeThreshold > nowSeconds + policy.maxLifetimeSeconds)
          throw validationError(
            terms,
            `beforeThreshold must be at most ${policy.maxLifetimeSeconds} seconds from now (SESSION_MAX_LIFETIME_SECONDS)`,
          );
        expiresAtSeconds = Math.min(expiresAtSeconds ?? decoded.beforeThreshold, decoded.beforeThreshold);
        break;
      case 'redeemer':
        // Optional: the delegate is the session key, not ANY_DELEGATE (checked above), and the
        // DelegationManager lets only it redeem (`delegate != msg.sender && delegate != ANY_DELEGATE`
        // reverts InvalidDelegate).
        if (!decoded.redeemers.some((redeemer) => isAddressEqual(redeemer, policy.sessionKey)))
          throw validationError(
            terms,
            `must name the gateway's session key ${policy.sessionKey} as a redeemer`,
          );
        break;
      case 'valueLte':
        // The gateway's transfers carry no native value: any bound admits them. Optional: the amount
        // cap pins the call's target to USDC (`require(token == target, "...:invalid-contract")`), whose
        // `transfer` is not payable, so a call carrying ETH reverts and moves nothing.
        break;
      case 'nonce':
        // Checked against the chain by the authorizer: a stale nonce is a revoked delegation.
        nonce = BigInt(decoded.nonce);
        break;
      default:
        throw validationError(`${field}.enforcer`, `is not an enforcer the gateway accepts`);
    }
  });

  if (limits.totalCapAtomic === undefined && limits.period === undefined)
    throw validationError(
      'delegation.caveats',
      `must cap the amount: an ERC20TransferAmountEnforcer or ERC20PeriodTransferEnforcer caveat on USDC ${policy.usdc}`,
    );
  if (expiresAtSeconds === undefined)
    throw validationError('delegation.caveats', 'must set an expiry: a TimestampEnforcer caveat');

  const expiresAt = new Date(expiresAtSeconds * 1000);
  return {
    delegation: {
      delegate: getAddress(delegation.delegate),
      delegator: getAddress(delegation.delegator),
      authority: ROOT_AUTHORITY,
      caveats: delegation.caveats.map((caveat) => ({
        enforcer: getAddress(caveat.enforcer),
        terms: caveat.terms,
        args: '0x',
      })),
      salt: delegation.salt,
    },
    limits: {
      token: policy.usdc,
      recipient: policy.treasury,
      expiresAt: expiresAt.toISOString(),
      ...limits,
    },
    expiresAt,
    ...(nonce !== undefined && { nonce }),
  };
}

/** The accepted enforcers of the environment, by lower-case address. */
export function acceptedEnforcers(environment: SmartAccountsEnvironment): Record<AcceptedEnforcer, Address> {
  const addresses = {} as Record<AcceptedEnforcer, Address>;
  for (const name of ACCEPTED_ENFORCERS) {
    const address = environment.caveatEnforcers[name];
    if (!address) throw new Error(`the Delegation Framework environment lacks ${name}`);
    addresses[name] = getAddress(address);
  }
  return addresses;
}

function enforcerNamesByAddress(environment: SmartAccountsEnvironment): Map<string, AcceptedEnforcer> {
  return new Map(
    Object.entries(acceptedEnforcers(environment)).map(([name, address]) => [
      address.toLowerCase(),
      name as AcceptedEnforcer,
    ]),
  );
}

function decodeTerms(caveat: Caveat, field: string, name: AcceptedEnforcer) {
  try {
    return decodeAcceptedCaveat(name, caveat);
  } catch (error) {
    throw validationError(field, `cannot be decoded as ${name} terms: ${(error as Error).message}`);
  }
}

function requireUsdc(policy: SessionPolicy, token: Hex, field: string): void {
  if (!isAddressEqual(token, policy.usdc))
    throw validationError(field, `must name USDC ${policy.usdc} as the token`);
}

function requireCap(policy: SessionPolicy, amount: bigint, field: string, name: string): void {
  if (amount < policy.minCapAtomic)
    throw validationError(
      field,
      `${name} must be at least ${policy.minCapAtomic} USDC atomic units (SESSION_MIN_CAP_ATOMIC)`,
    );
}
