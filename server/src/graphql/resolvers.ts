import { GraphQLError, GraphQLScalarType, Kind } from 'graphql';
import type { IResolvers, MercuriusContext } from 'mercurius';
import { type Address, getAddress, isAddress } from 'viem';
import type { Caller } from '../auth/jwt.js';
import { debtOf, type UsageRecord } from '../billing/ledger.js';
import { formatUsd, formatUsdcAtomic } from '../billing/money.js';
import type { CostBreakdown } from '../billing/pricing.js';
import {
  type Page,
  type SpendGrouping,
  settledTotals,
  settlementPage,
  spendBy,
  type UsageTotals,
  type UsageWithSettlement,
  usagePage,
  usageTotals,
} from '../billing/reports.js';
import type { Keyset, Settlement, SettlementStatus } from '../billing/settlements.js';
import { GatewayError } from '../errors.js';
import { completionTokens, promptTokens } from '../providers/usage.js';
import type { Store } from '../store/database.js';
import { decodeCursor, encodeCursor } from './cursor.js';
import { graphqlError } from './errors.js';
import { MAX_PAGE_SIZE } from './limits.js';

/** What each GraphQL request carries: the store and who is asking. */
export interface LedgerContext {
  store: Store;
  caller: Caller | null;
  /** Why the credentials were refused (GatewayError 401), or the failure checking them. */
  authError?: Error;
}

declare module 'mercurius' {
  interface MercuriusContext extends LedgerContext {}
}

type Args<T> = { wallet?: string | null } & T;
export type PageArgs = { first: number; after?: string | null };

const ISO_8601 = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2}))?$/;

function parseDateTime(value: unknown): Date {
  const date = typeof value === 'string' && ISO_8601.test(value) ? new Date(value) : undefined;
  if (!date || Number.isNaN(date.getTime()))
    throw new GraphQLError('DateTime must be an ISO 8601 string such as 2025-06-01 or 2025-06-01T12:00:00Z');
  const day = (value as string).slice(0, 10);
  if (!isCalendarDay(day)) throw new GraphQLError(`DateTime must be a calendar date: ${day} is not one`);
  return date;
}

/** V8 takes any day up to 31 and rolls it over (2030-04-31 is May 1st): a real day reads back the same. */
function isCalendarDay(day: string): boolean {
  return new Date(day).toISOString().startsWith(day);
}

const DateTime = new GraphQLScalarType<Date, string>({
  name: 'DateTime',
  serialize: (value) => {
    if (value instanceof Date) return value.toISOString();
    throw new TypeError('DateTime serializes Date values only');
  },
  parseValue: parseDateTime,
  parseLiteral: (ast) => parseDateTime(ast.kind === Kind.STRING ? ast.value : undefined),
});

/** Who is asking; refused when the credentials were not accepted or none were sent. */
export function authenticatedCaller(context: MercuriusContext): Caller {
  if (context.authError instanceof GatewayError)
    throw graphqlError('UNAUTHENTICATED', context.authError.message);
  if (context.authError) throw context.authError;
  if (!context.caller) throw graphqlError('UNAUTHENTICATED', 'send "Authorization: Bearer <access token>"');
  return context.caller;
}

/** The wallet a request may see: its own, or, for the operator, the one it names. */
function walletFor(context: MercuriusContext, requested: string | null | undefined): Address {
  const caller = authenticatedCaller(context);
  let wallet: Address | undefined;
  if (requested !== null && requested !== undefined) {
    if (!isAddress(requested, { strict: false }))
      throw graphqlError('BAD_USER_INPUT', 'wallet must be a 0x-prefixed 20-byte address');
    wallet = getAddress(requested);
  }
  if (caller.kind === 'admin') {
    if (!wallet) throw graphqlError('BAD_USER_INPUT', 'operator queries must name a wallet');
    return wallet;
  }
  if (wallet && wallet !== caller.wallet)
    throw graphqlError('FORBIDDEN', 'an access token can only read its own wallet');
  return caller.wallet;
}

export function page(args: PageArgs): { first: number; after?: Keyset } {
  if (!Number.isInteger(args.first) || args.first < 0 || args.first > MAX_PAGE_SIZE)
    throw graphqlError('BAD_USER_INPUT', `first must be between 0 and ${MAX_PAGE_SIZE}`);
  if (args.after === null || args.after === undefined) return { first: args.first };
  const after = decodeCursor(args.after);
  if (!after) throw graphqlError('BAD_USER_INPUT', 'after must be an endCursor returned by this API');
  return { first: args.first, after };
}

/** A free-text filter: PostgreSQL's text cannot hold NUL (SQLite's can), so both refuse it here. */
function textFilter(name: string, value: string | null | undefined): string | undefined {
  if (value?.includes('\0')) throw graphqlError('BAD_USER_INPUT', `${name} must not contain NUL characters`);
  return value ?? undefined;
}

export const money = (pico: bigint) => ({ usd: formatUsd(pico), picoUsd: pico.toString() });

const cost = (breakdown: CostBreakdown) => ({
  provider: money(breakdown.providerPicoUsd),
  commission: money(breakdown.commissionPicoUsd),
  total: money(breakdown.totalPicoUsd),
});

export function connection<T>(result: Page<T>, keyset: (item: T) => Keyset, node: (item: T) => unknown) {
  const edges = result.items.map((item) => ({ cursor: encodeCursor(keyset(item)), node: node(item) }));
  return {
    edges,
    pageInfo: {
      hasNextPage: result.hasNextPage,
      hasPreviousPage: false,
      startCursor: edges[0]?.cursor ?? null,
      endCursor: edges.at(-1)?.cursor ?? null,
    },
  };
}

const usageKeyset = (record: UsageRecord): Keyset => ({ createdAt: record.createdAt, id: record.requestId });
export const settlementKeyset = (settlement: Settlement): Keyset => ({
  createdAt: settlement.createdAt,
  id: settlement.id,
});

function usageNode(record: UsageWithSettlement) {
  const { usage } = record;
  return {
    requestId: record.requestId,
    model: record.model,
    rail: record.rail,
    createdAt: record.createdAt,
    exact: usage.exact,
    tokens: {
      prompt: promptTokens(usage),
      completion: completionTokens(usage),
      input: usage.inputTokens,
      cacheRead: usage.cacheReadTokens,
      cacheWrite: usage.cacheWriteTokens,
      output: usage.outputTokens,
      reasoning: usage.reasoningTokens,
    },
    cost: cost(record.cost),
    settlement: record.settlement && settlementNode(record.settlement),
  };
}

export function settlementNode(settlement: Settlement) {
  return {
    id: settlement.id,
    payer: settlement.payer,
    rail: settlement.rail,
    status: settlement.status,
    amountUsd: formatUsdcAtomic(settlement.amountAtomic),
    amountAtomic: settlement.amountAtomic.toString(),
    recordsTotal: money(settlement.recordsTotalPicoUsd),
    recordCount: settlement.recordCount,
    creditBefore: money(settlement.creditBeforePicoUsd),
    carried: money(settlement.carriedPicoUsd),
    txHash: settlement.txHash,
    blockNumber: settlement.blockNumber?.toString() ?? null,
    gasUsed: settlement.gasUsed?.toString() ?? null,
    feeWei: settlement.feeWei?.toString() ?? null,
    failureReason: settlement.failureReason,
    createdAt: settlement.createdAt,
    sentAt: settlement.sentAt,
    confirmedAt: settlement.confirmedAt,
    failedAt: settlement.failedAt,
  };
}

function totalsNode(totals: UsageTotals) {
  return {
    requests: totals.requests.toString(),
    promptTokens: (totals.inputTokens + totals.cacheReadTokens + totals.cacheWriteTokens).toString(),
    completionTokens: (totals.outputTokens + totals.reasoningTokens).toString(),
    inputTokens: totals.inputTokens.toString(),
    cacheReadTokens: totals.cacheReadTokens.toString(),
    cacheWriteTokens: totals.cacheWriteTokens.toString(),
    outputTokens: totals.outputTokens.toString(),
    reasoningTokens: totals.reasoningTokens.toString(),
    providerCost: money(totals.providerPicoUsd),
    commission: money(totals.commissionPicoUsd),
    cost: money(totals.totalPicoUsd),
  };
}

export function ledgerResolvers(): IResolvers {
  return {
    DateTime,
    Query: {
      me: (_root, args: Args<object>, context) => ({ wallet: walletFor(context, args.wallet) }),

      usage: async (
        _root,
        args: Args<PageArgs & { model?: string | null; from?: Date | null; to?: Date | null }>,
        context,
      ) => {
        const wallet = walletFor(context, args.wallet);
        const result = await usagePage(context.store, wallet, {
          ...page(args),
          model: textFilter('model', args.model),
          from: args.from ?? undefined,
          to: args.to ?? undefined,
        });
        return connection(result, usageKeyset, usageNode);
      },

      settlements: async (_root, args: Args<PageArgs & { status?: SettlementStatus | null }>, context) => {
        const wallet = walletFor(context, args.wallet);
        const result = await settlementPage(context.store, wallet, {
          ...page(args),
          status: args.status ?? undefined,
        });
        return connection(result, settlementKeyset, settlementNode);
      },

      spend: async (
        _root,
        args: Args<{ groupBy: SpendGrouping; from?: Date | null; to?: Date | null }>,
        context,
      ) => {
        const wallet = walletFor(context, args.wallet);
        const buckets = await spendBy(context.store, wallet, args.groupBy, {
          from: args.from ?? undefined,
          to: args.to ?? undefined,
        });
        return buckets.map((bucket) => ({ key: bucket.key, usage: totalsNode(bucket.totals) }));
      },
    },

    Me: {
      debt: async (me: { wallet: Address }, _args, context) => {
        const debt = await debtOf(context.store, me.wallet);
        return {
          unpaid: money(debt.unpaidPicoUsd),
          credit: money(debt.creditPicoUsd),
          owed: money(debt.owedPicoUsd),
          owedAtomic: debt.owedAtomic.toString(),
        };
      },
      totals: async (me: { wallet: Address }, _args, context) => {
        const [usage, settled] = await Promise.all([
          usageTotals(context.store, me.wallet),
          settledTotals(context.store, me.wallet),
        ]);
        return {
          usage: totalsNode(usage),
          settlements: settled.settlements,
          settledUsd: formatUsdcAtomic(settled.amountAtomic),
          settledAtomic: settled.amountAtomic.toString(),
        };
      },
    },

    Settlement: {
      records: async (settlement: { id: string; payer: Address }, args: PageArgs, context) => {
        const result = await usagePage(context.store, settlement.payer, {
          ...page(args),
          settlementId: settlement.id,
        });
        return connection(result, usageKeyset, usageNode);
      },
    },
  };
}
