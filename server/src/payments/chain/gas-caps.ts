/**
 * The most gas the gateway's relayer spends on one transaction of each kind. The payer's account
 * runs inside each (its signature check, its execution, its initialization), so a transaction whose
 * estimate is above its cap is refused unsent rather than paid for by the operator.
 */
export const GAS_CAPS = {
  // Redeeming a delegation of a HybridDeleGator (EOA owner): 206,459-240,659 on anvil; room for a passkey's P256 check.
  sessionSettlement: 1_000_000n,
  // EIP-3009 transferWithAuthorization: 68,838-85,938 from an EOA, 77,680 from a HybridDeleGator (ERC-1271) on anvil.
  x402Settlement: 150_000n,
  // An upto permit through x402's Permit2 proxy: 81,895-98,995 from an EOA on anvil; 152,139 with its EIP-2612
  // permit for Permit2 submitted first (cold storage). Room for a smart account's ERC-1271 checks of both.
  x402UptoSettlement: 300_000n,
  // Redeeming an x402 ERC-7710 delegation (one or two hops, the framework's enforcers only): 201,683-218,783 from a
  // HybridDeleGator with an amount, timestamp and redeemer caveat on anvil.
  x402DelegationSettlement: 500_000n,
  // SimpleFactory deploying a HybridDeleGator: 187,057 with an EOA owner, 429,890 with three passkeys more, on anvil.
  deployment: 1_000_000n,
} as const;

export type TransactionKind = keyof typeof GAS_CAPS;

// Gas use varies a little between estimate and execution (cold storage, the first transfer of a period).
const GAS_MARGIN_PERCENT = 120n;

/** The estimate of a transaction is above its kind's cap: it is not sent. */
export class GasCapExceededError extends Error {
  readonly cap: bigint;

  constructor(
    readonly kind: TransactionKind,
    readonly estimate: bigint,
    cap: bigint = GAS_CAPS[kind],
  ) {
    super(`it needs ${estimate} gas; the gateway spends at most ${cap} on one`);
    this.name = 'GasCapExceededError';
    this.cap = cap;
  }
}

/**
 * The gas limit a transaction of `kind` is sent with: its estimate and a margin, never above the cap
 * (times `items`, for a transaction carrying that many settlements).
 */
export function cappedGasLimit(kind: TransactionKind, estimate: bigint, items = 1): bigint {
  const cap = GAS_CAPS[kind] * BigInt(items);
  if (estimate > cap) throw new GasCapExceededError(kind, estimate, cap);
  const withMargin = (estimate * GAS_MARGIN_PERCENT) / 100n;
  return withMargin < cap ? withMargin : cap;
}

/** The ETH price the gateway assumes, in USD: no price is known on chain, and this is above any ETH has traded at. */
const ETH_PRICE_USD = 10_000n;

/** What `gas` at `feePerGasWei` may cost the operator in pico-USD, at ETH_PRICE_USD: overstated, never understated. */
export function gasCostPicoUsd(gas: bigint, feePerGasWei: bigint): bigint {
  // wei / 1e18 = ETH; * ETH_PRICE_USD = USD; * 1e12 = pico-USD. Rounded up.
  return (gas * feePerGasWei * ETH_PRICE_USD + 999_999n) / 1_000_000n;
}
