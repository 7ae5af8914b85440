import { BaseError, decodeErrorResult, type Hex, isHex, parseAbi } from 'viem';
import { revertReason } from '../chain/index.js';

/** Why the chain refuses a settlement: the payer's side, so the answer is 402. */
export type RefusalReason =
  | 'cap_reached'
  | 'expired'
  | 'revoked'
  | 'insufficient_balance'
  | 'invalid_delegation'
  | 'account_not_deployed'
  | 'reverted'
  | 'not_paid';

const EXPLANATIONS: Record<RefusalReason, string> = {
  cap_reached: "the session's spending cap is used up; authorize a new session with a higher cap",
  expired: "the session's delegation has expired on chain; authorize a new session",
  revoked: 'the delegation is disabled in the DelegationManager; authorize a new session',
  insufficient_balance: 'the smart account holds less USDC than it owes; fund it and retry',
  invalid_delegation: 'the delegation cannot be redeemed by the gateway; authorize a new session',
  account_not_deployed: 'the smart account could not be deployed; deploy it and retry',
  reverted: 'redeeming the delegation reverts on chain',
  not_paid:
    'the settlement transaction moved no USDC from the smart account to the treasury; authorize a new session from a MetaMask smart account',
};

/** The chain will not move the payer's USDC: settlement is refused and the request must not be forwarded. */
export class SettlementRefusedError extends Error {
  constructor(
    readonly reason: RefusalReason,
    /** What the chain said (revert reason), when known. */
    readonly revert: string | undefined,
    readonly owedAtomic: bigint,
  ) {
    super(revert ? `${EXPLANATIONS[reason]} (${revert})` : EXPLANATIONS[reason]);
    this.name = 'SettlementRefusedError';
  }
}

/** The gateway's side failed (RPC down, transaction still in flight): retry later, nothing is lost. */
export class SettlementUnavailableError extends Error {
  constructor(
    message: string,
    /**
     * A transaction sent for the payer's debt (or an unfinished settlement's) may still pay it: the
     * ledger counts what it claimed as owed until the chain says, so that figure is not the payer's to pay.
     */
    readonly paymentInFlight: boolean,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'SettlementUnavailableError';
  }
}

/**
 * The settlement's transaction passed its simulation and reverted on chain: failed, nothing paid.
 * Retryable (the state moved meanwhile), and the next attempt's simulation says what the payer must fix.
 */
export class SettlementRevertedError extends SettlementUnavailableError {
  /** `batched`: the transaction paid other payers' settlements too (all reverted with it). */
  constructor(
    hash: string,
    readonly batched = false,
  ) {
    super(`settlement ${hash} reverted on chain after its simulation passed; nothing was paid; retry`, false);
    this.name = 'SettlementRevertedError';
  }
}

// OpenZeppelin's token errors (the test USDC; USDC itself reverts with strings).
const tokenErrors = parseAbi([
  'error ERC20InsufficientBalance(address sender, uint256 balance, uint256 needed)',
  'error ERC20InvalidReceiver(address receiver)',
]);

const BY_REVERT: Array<[RegExp, RefusalReason]> = [
  [/allowance-exceeded|transfer-amount-exceeded/, 'cap_reached'],
  [/expired-delegation|early-delegation/, 'expired'],
  [/CannotUseADisabledDelegation/, 'revoked'],
  [/ERC20InsufficientBalance|transfer amount exceeds balance/, 'insufficient_balance'],
  [
    /InvalidDelegate|InvalidDelegator|InvalidAuthority|InvalidSignature|InvalidERC1271Signature|ECDSA|unauthorized-redeemer/,
    'invalid_delegation',
  ],
];

/** A refusal when `error` is a revert (of a simulation or a call), undefined when it is anything else. */
export function refusalFromRevert(error: unknown, owedAtomic: bigint): SettlementRefusedError | undefined {
  if (!(error instanceof BaseError)) return undefined;
  const data = revertData(error);
  const decoded = revertReason(error) ?? (data && decodeTokenError(data));
  const reverted = decoded !== undefined || data !== undefined || /revert/i.test(error.shortMessage);
  if (!reverted) return undefined;
  const revert = decoded ?? error.shortMessage;
  const reason = BY_REVERT.find(([pattern]) => pattern.test(revert))?.[1] ?? 'reverted';
  return new SettlementRefusedError(reason, revert, owedAtomic);
}

function revertData(error: BaseError): Hex | undefined {
  const carrier = error.walk((cause) => isHex((cause as { data?: unknown }).data)) as { data?: Hex } | null;
  return carrier?.data;
}

function decodeTokenError(data: Hex): string | undefined {
  try {
    const { errorName, args } = decodeErrorResult({ abi: tokenErrors, data });
    return `${errorName}(${(args ?? []).join(', ')})`;
  } catch {
    return undefined;
  }
}
