import type { IResolvers, MercuriusContext } from 'mercurius';
import { formatEther } from 'viem';
import { defaultEconomicsFrom, economicsByDay, largestDebtors } from '../billing/operator-reports.js';
import { type SettlementStatus, settlementsIn } from '../billing/settlements.js';
import { type RelayerFunds, readLedgerSnapshot } from '../observability/index.js';
import { chainErrorReason } from '../payments/chain/index.js';
import type { CollectorState } from '../payments/session/index.js';
import { graphqlError } from './errors.js';
import {
  authenticatedCaller,
  connection,
  money,
  type PageArgs,
  page,
  settlementKeyset,
  settlementNode,
} from './resolvers.js';

/** What the operator's view reads besides the ledger. */
export interface OperatorSources {
  /** The relayer's ETH and runway (the chain read /health and /metrics share). */
  relayer?: RelayerFunds;
  /** The state of this instance's collector. */
  collector?: () => CollectorState;
}

const DAY_MS = 86_400_000;
/** A leap year: a year of days can always be asked at once. */
const MAX_ECONOMICS_DAYS = 366;

/** Refuses anyone but the bearer of ADMIN_TOKEN. */
function requireOperator(context: MercuriusContext): void {
  if (authenticatedCaller(context).kind !== 'admin')
    throw graphqlError('FORBIDDEN', 'the operator view needs the operator token (ADMIN_TOKEN)');
}

/**
 * [from, to) of the economics: by default up to now from the start of the UTC day 29 days before
 * `to`'s (30 whole days, today's included), at most MAX_ECONOMICS_DAYS long.
 */
function economicsRange(args: { from?: Date | null; to?: Date | null }): { from: Date; to: Date } {
  const to = args.to ?? new Date();
  const from = args.from ?? defaultEconomicsFrom(to);
  if (from.getTime() >= to.getTime()) throw graphqlError('BAD_USER_INPUT', 'from must be before to');
  if (to.getTime() - from.getTime() > MAX_ECONOMICS_DAYS * DAY_MS)
    throw graphqlError('BAD_USER_INPUT', `from and to must be at most ${MAX_ECONOMICS_DAYS} days apart`);
  return { from, to };
}

export function operatorResolvers(sources: OperatorSources): IResolvers {
  return {
    Query: {
      operator: (_root, _args, context) => {
        requireOperator(context);
        return {};
      },
    },
    Operator: {
      economics: async (_operator, args: { from?: Date | null; to?: Date | null }, context) => {
        const buckets = await economicsByDay(context.store, economicsRange(args));
        return buckets.map((bucket) => ({
          day: bucket.day,
          rail: bucket.rail,
          requests: bucket.requests.toString(),
          commission: money(bucket.commissionPicoUsd),
          settlements: bucket.settlements,
          gasUsed: bucket.gasUsed.toString(),
          gasSpentWei: bucket.feeWei.toString(),
          gasSpentEth: formatEther(bucket.feeWei),
        }));
      },

      relayer: async () => {
        if (!sources.relayer) return null;
        const funds = sources.relayer;
        const runway = await funds.runway().catch((error: unknown) => {
          throw graphqlError(
            'SERVICE_UNAVAILABLE',
            `the relayer's balance cannot be read: ${chainErrorReason(error)}`,
          );
        });
        return {
          address: funds.address,
          balanceWei: runway.balanceWei.toString(),
          balanceEth: formatEther(runway.balanceWei),
          gasPriceWei: runway.gasPriceWei.toString(),
          settlementGas: runway.settlementGas.toString(),
          settlementsLeft: Number.isFinite(runway.settlementsLeft) ? runway.settlementsLeft.toString() : null,
        };
      },

      exposure: async (_operator, _args, context) => {
        const snapshot = await readLedgerSnapshot(context.store);
        return {
          outstanding: money(snapshot.outstandingPicoUsd),
          unprovenOutstanding: money(snapshot.unprovenOutstandingPicoUsd),
          unfinishedSettlements: snapshot.unfinishedSettlements,
        };
      },

      settlements: async (_operator, args: PageArgs & { status: SettlementStatus }, context) => {
        if (args.status === 'confirmed')
          throw graphqlError(
            'BAD_USER_INPUT',
            'status must be pending, sent or failed (confirmed settlements are listed per wallet)',
          );
        const { first, after } = page(args);
        const rows = await settlementsIn(context.store, args.status, { limit: first + 1, after });
        return connection(
          { items: rows.slice(0, first), hasNextPage: rows.length > first },
          settlementKeyset,
          settlementNode,
        );
      },

      collector: () => {
        if (!sources.collector) return null;
        const state = sources.collector();
        return {
          ...state,
          lastRunAt: state.lastRunAt === null ? null : new Date(state.lastRunAt),
          failing: state.failing.map((failure) => ({
            ...failure,
            nextAttemptAt: new Date(failure.nextAttemptAt),
          })),
        };
      },

      topDebtors: async (_operator, args: PageArgs, context) => {
        const debtors = await largestDebtors(context.store, page(args).first);
        return debtors.map((debtor) => ({
          wallet: debtor.wallet,
          unpaid: money(debtor.unpaidPicoUsd),
          owed: money(debtor.owedPicoUsd),
          proven: debtor.proven,
        }));
      },
    },
  };
}
