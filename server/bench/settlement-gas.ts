/**
 * Settlement economics for `npm run bench`: the gas of the settlements a run caused, read from their
 * receipts, by rail (session: `redeemDelegations`; x402: the token's `transferWithAuthorization`) and by
 * whether it was the payer's first, and the request cost at which the commission pays that gas on Base.
 */

import { type Address, type Hash, parseAbiItem, size } from 'viem';
import type { LocalChain } from '../devkit/chain/index.js';

/** What a settlement costs on Base, as assumed here (the local chain's own gas price means nothing). */
export const BASE_ASSUMPTIONS = {
  /** Base's usual L2 base fee plus priority fee. */
  l2GasPriceWei: BigInt(Math.round(Number(process.env.BENCH_L2_GAS_PRICE_GWEI ?? 0.01) * 1e9)),
  /** L1 base fee seen by Base's GasPriceOracle; blobs at their floor (1 wei). */
  l1BaseFeeWei: BigInt(Math.round(Number(process.env.BENCH_L1_BASE_FEE_GWEI ?? 1) * 1e9)),
  blobBaseFeeWei: 1n,
  /** Base's Ecotone/Fjord fee scalars. */
  baseFeeScalar: 2269n,
  blobBaseFeeScalar: 1_055_762n,
  /** A signed transaction's bytes besides its calldata (nonce, gas fields, to, signature...). */
  envelopeBytes: 110,
  ethUsd: Number(process.env.BENCH_ETH_USD ?? 3000),
};

export interface RailGas {
  /** Gas of each payer's first settlement (numbers, for the results' JSON: gas fits in one). */
  first: number[];
  /** Gas of every later one. */
  later: number[];
  /** Bytes of each settlement's calldata. */
  calldataBytes: number[];
}

export interface SettlementGas {
  session: RailGas;
  x402: RailGas;
}

const emptyRail = (): RailGas => ({ first: [], later: [], calldataBytes: [] });

/**
 * The settlements `relayer` sent between two blocks: the transactions holding a USDC transfer to the
 * treasury, sent to the DelegationManager (session) or to the token (x402), in chain order; a
 * transaction paying several payers (a batch) counts as that many settlements, each its share.
 */
export async function settlementGas(
  local: LocalChain,
  relayer: Address,
  fromBlock: bigint,
  toBlock: bigint,
): Promise<SettlementGas> {
  const transfers = await local.publicClient.getLogs({
    address: local.usdc,
    event: parseAbiItem('event Transfer(address indexed from, address indexed to, uint256 value)'),
    args: { to: local.accounts.treasury.address },
    fromBlock,
    toBlock,
  });
  const gas: SettlementGas = { session: emptyRail(), x402: emptyRail() };
  const paid = new Set<string>();
  // A session-rail transaction may carry several payers' settlements (a batch): each is its share.
  const byTransaction = new Map<Hash, typeof transfers>();
  for (const log of transfers)
    byTransaction.set(log.transactionHash, [...(byTransaction.get(log.transactionHash) ?? []), log]);
  for (const [hash, logs] of byTransaction) {
    const transaction = await local.publicClient.getTransaction({ hash });
    if (transaction.from.toLowerCase() !== relayer.toLowerCase() || !transaction.to) continue;
    const rail =
      transaction.to.toLowerCase() === local.environment.DelegationManager.toLowerCase()
        ? gas.session
        : transaction.to.toLowerCase() === local.usdc.toLowerCase()
          ? gas.x402
          : undefined;
    if (!rail) continue;
    const { gasUsed } = await local.publicClient.getTransactionReceipt({ hash });
    for (const log of logs) {
      const payer = (log.args.from as Address).toLowerCase();
      (paid.has(payer) ? rail.later : rail.first).push(Number(gasUsed / BigInt(logs.length)));
      paid.add(payer);
      rail.calldataBytes.push(Math.ceil(size(transaction.input) / logs.length));
    }
  }
  return gas;
}

/** The lower median: of two first settlements, not the one that gave the treasury its first USDC (a fresh balance slot). */
const median = (values: number[]) =>
  values.length === 0 ? undefined : [...values].sort((a, b) => a - b)[(values.length - 1) >> 1];

/** A settlement's fee on Base in wei: L2 execution at the assumed gas price, plus the L1 data fee (Fjord). */
export function baseFeeWei(gas: bigint, calldataBytes: number): bigint {
  const a = BASE_ASSUMPTIONS;
  // Uncompressed size: an upper bound of the FastLZ estimate the oracle uses.
  const bytes = BigInt(calldataBytes + a.envelopeBytes);
  const l1 =
    (bytes * (a.baseFeeScalar * a.l1BaseFeeWei * 16n + a.blobBaseFeeScalar * a.blobBaseFeeWei)) / 1_000_000n;
  return gas * a.l2GasPriceWei + l1;
}

export interface RailEconomics {
  settlements: { first: number; later: number };
  gas: { first?: number; later?: number };
  /** Fee of a later settlement (a first one when there is none) on Base, USD. */
  feeUsd?: number;
  /** The provider cost per settlement at which the commission pays that fee, and the request cost it makes. */
  breakEven?: { providerCostUsd: number; requestCostUsd: number };
}

/** Per rail: median gas of first and later settlements, their fee on Base and the break-even. */
export function economics(
  gas: SettlementGas,
  commissionBps: number,
): Record<keyof SettlementGas, RailEconomics> {
  const of = (rail: RailGas): RailEconomics => {
    const first = median(rail.first);
    const later = median(rail.later);
    const typical = later ?? first;
    const bytes = Math.max(0, ...rail.calldataBytes);
    return {
      settlements: { first: rail.first.length, later: rail.later.length },
      gas: { first, later },
      ...(typical === undefined ? {} : onBase(typical, bytes, commissionBps)),
    };
  };
  return { session: of(gas.session), x402: of(gas.x402) };
}

/** A settlement of `gas` and `calldataBytes` on Base: its fee, and the break-even of the commission. */
export function onBase(
  gas: number,
  calldataBytes: number,
  commissionBps: number,
): Required<Pick<RailEconomics, 'feeUsd' | 'breakEven'>> {
  const feeUsd = (Number(baseFeeWei(BigInt(gas), calldataBytes)) / 1e18) * BASE_ASSUMPTIONS.ethUsd;
  const providerCostUsd = feeUsd / (commissionBps / 10_000);
  return {
    feeUsd,
    breakEven: { providerCostUsd, requestCostUsd: providerCostUsd * (1 + commissionBps / 10_000) },
  };
}

/** The assumptions, in one line of the report. */
export function assumptionsLine(commissionBps: number): string {
  const a = BASE_ASSUMPTIONS;
  return `assumed for Base: L2 gas ${Number(a.l2GasPriceWei) / 1e9} gwei, L1 base fee ${Number(a.l1BaseFeeWei) / 1e9} gwei (blob fee 1 wei; scalars ${a.baseFeeScalar}/${a.blobBaseFeeScalar}; size = calldata + ${a.envelopeBytes} bytes, uncompressed), ETH $${a.ethUsd}, commission ${commissionBps / 100}% (COMMISSION_BPS ${commissionBps})`;
}
