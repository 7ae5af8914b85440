import type { Address, PublicClient } from 'viem';
import type { TransactionKind } from './metrics.js';

/** The gas a settlement is taken to need before the relayer has sent one: a delegation redemption takes 190,000-320,000. */
export const TYPICAL_SETTLEMENT_GAS = 250_000n;

/** How long a read of the relayer's balance and the gas price serves (scrapes and /health probes share it). */
const READ_MAX_AGE_MS = 5_000;

/** What the relayer's ETH still pays for. */
export interface RelayerRunway {
  balanceWei: bigint;
  /** The node's gas price (eth_gasPrice: base fee plus a tip). */
  gasPriceWei: bigint;
  /** The mean gas of the settlements this process has seen mined; TYPICAL_SETTLEMENT_GAS before the first. */
  settlementGas: bigint;
  /** balance / (settlementGas x gasPrice), rounded down: Infinity when gas is free. */
  settlementsLeft: number;
}

/** The relayer's ETH, read from the chain at most every READ_MAX_AGE_MS and again after each of its transactions. */
export interface RelayerFunds {
  readonly address: Address;
  runway(): Promise<RelayerRunway>;
  /** One of its transactions was mined: its balance changed, and a settlement's gas joins the mean. */
  spent(kind: TransactionKind, gasUsed: bigint): void;
}

export function relayerFunds(
  client: Pick<PublicClient, 'getBalance' | 'getGasPrice'>,
  address: Address,
): RelayerFunds {
  let last: { at: number; read: Promise<[bigint, bigint]> } | undefined;
  let settlements = 0n;
  let settlementGasTotal = 0n;
  return {
    address,
    async runway() {
      const now = Date.now();
      if (!last || now - last.at >= READ_MAX_AGE_MS)
        last = { at: now, read: Promise.all([client.getBalance({ address }), client.getGasPrice()]) };
      const [balanceWei, gasPriceWei] = await last.read;
      const settlementGas = settlements > 0n ? settlementGasTotal / settlements : TYPICAL_SETTLEMENT_GAS;
      const perSettlement = settlementGas * gasPriceWei;
      return {
        balanceWei,
        gasPriceWei,
        settlementGas,
        settlementsLeft: perSettlement === 0n ? Number.POSITIVE_INFINITY : Number(balanceWei / perSettlement),
      };
    },
    spent(kind, gasUsed) {
      last = undefined;
      if (kind !== 'settlement') return;
      settlements++;
      settlementGasTotal += gasUsed;
    },
  };
}
