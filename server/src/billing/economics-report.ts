import { formatEther, parseUnits } from 'viem';
import type { Store } from '../store/database.js';
import { formatUsd } from './money.js';
import { type EconomicsBucket, economicsByDay, economicsByRail } from './operator-reports.js';

const WEI_PER_ETH = 10n ** 18n;

/** One rail's commission against its gas over the report's period. */
export interface RailEconomics extends Omit<EconomicsBucket, 'day'> {
  /** The gas at the given ETH price, rounded up (present when a price is given). */
  gasPicoUsd?: bigint;
  /** Commission less gas (present when a price is given). */
  netPicoUsd?: bigint;
}

/** What `npm run reconcile` states of the operator's economics over [from, to). */
export interface EconomicsReport {
  from: Date;
  to: Date;
  /** The ETH price the gas is valued at, as given ("3000"). */
  ethUsd?: string;
  rails: RailEconomics[];
}

/** An ETH price in USD ("3000", "2450.75") as pico-USD per ETH; undefined when it is not one. */
export function picoUsdPerEth(ethUsd: string): bigint | undefined {
  if (!/^\d+(\.\d{1,12})?$/.test(ethUsd)) return undefined;
  return parseUnits(ethUsd, 12);
}

/** Commission earned against gas spent over [from, to), per rail, valued at `ethUsd` when given. */
export async function economicsReport(
  store: Store,
  range: { from: Date; to: Date },
  ethUsd?: string,
): Promise<EconomicsReport> {
  const price = ethUsd === undefined ? undefined : picoUsdPerEth(ethUsd);
  if (ethUsd !== undefined && price === undefined)
    throw new RangeError(`not an ETH price in USD: "${ethUsd}"`);
  const rails = economicsByRail(await economicsByDay(store, range)).map((rail): RailEconomics => {
    if (price === undefined) return rail;
    const gasPicoUsd = (rail.feeWei * price + WEI_PER_ETH - 1n) / WEI_PER_ETH;
    return { ...rail, gasPicoUsd, netPicoUsd: rail.commissionPicoUsd - gasPicoUsd };
  });
  return { ...range, ...(ethUsd !== undefined && { ethUsd }), rails };
}

/** The economics as `npm run reconcile` prints them. */
export function formatEconomics(report: EconomicsReport): string {
  const heading = `Commission against gas, ${report.from.toISOString()} to ${report.to.toISOString()}:`;
  if (report.rails.length === 0) return `${heading} no requests and no settlements.`;
  const lines = report.rails.map((rail) => {
    const valued =
      rail.gasPicoUsd === undefined
        ? ''
        : ` (${formatUsd(rail.gasPicoUsd)} USD at ${report.ethUsd} USD/ETH); net ${formatUsd(rail.netPicoUsd as bigint)} USD`;
    return `- ${rail.rail} rail: ${rail.requests} requests, commission ${formatUsd(rail.commissionPicoUsd)} USD; ${rail.settlements} settlements, ${rail.gasUsed} gas, ${formatEther(rail.feeWei)} ETH${valued}`;
  });
  return [heading, ...lines].join('\n');
}
