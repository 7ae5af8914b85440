import { type ExpressionBuilder, sql } from 'kysely';
import { type Address, getAddress } from 'viem';
import type { Store } from '../store/database.js';
import { exactSum, readSum, toBigInt } from '../store/exact-sum.js';
import type { Database } from '../store/schema.js';
import { toUsageRecord, type UsageRecord } from './ledger.js';
import {
  type Keyset,
  type Settlement,
  type SettlementStatus,
  settlementsOf,
  toSettlement,
} from './settlements.js';

export interface Page<T> {
  items: T[];
  hasNextPage: boolean;
}

export interface UsageFilter {
  model?: string;
  /** Only the records a settlement claimed. */
  settlementId?: string;
  /** Inclusive. */
  from?: Date;
  /** Exclusive. */
  to?: Date;
}

export interface UsageWithSettlement extends UsageRecord {
  settlement: Settlement | null;
}

export interface UsageTotals {
  requests: bigint;
  inputTokens: bigint;
  cacheReadTokens: bigint;
  cacheWriteTokens: bigint;
  outputTokens: bigint;
  reasoningTokens: bigint;
  providerPicoUsd: bigint;
  commissionPicoUsd: bigint;
  totalPicoUsd: bigint;
}

export interface SettledTotals {
  settlements: number;
  amountAtomic: bigint;
}

export type SpendGrouping = 'DAY' | 'MODEL';

const DAY_MS = 86_400_000;

/** A payer's usage records, newest first, each with the settlement claiming it. */
export async function usagePage(
  store: Store,
  payer: Address,
  options: UsageFilter & { first: number; after?: Keyset },
): Promise<Page<UsageWithSettlement>> {
  let query = store.db
    .selectFrom('usage_records as u')
    .selectAll('u')
    .where('u.payer', '=', getAddress(payer))
    .where((eb) => usageFilter(eb, options))
    .orderBy('u.created_at', 'desc')
    .orderBy('u.request_id', 'desc')
    .limit(options.first + 1);
  const after = options.after;
  if (after)
    query = query.where((eb) =>
      eb.or([
        eb('u.created_at', '<', BigInt(after.createdAt.getTime())),
        eb.and([
          eb('u.created_at', '=', BigInt(after.createdAt.getTime())),
          eb('u.request_id', '<', after.id),
        ]),
      ]),
    );
  const rows = await query.execute();
  const records = rows.slice(0, options.first).map(toUsageRecord);
  const ids = [...new Set(records.flatMap((record) => (record.settlementId ? [record.settlementId] : [])))];
  const settlements = new Map(
    ids.length === 0
      ? []
      : (await store.db.selectFrom('settlements').selectAll().where('id', 'in', ids).execute()).map((row) => [
          row.id,
          toSettlement(row),
        ]),
  );
  return {
    items: records.map((record) => ({
      ...record,
      settlement: record.settlementId ? (settlements.get(record.settlementId) ?? null) : null,
    })),
    hasNextPage: rows.length > options.first,
  };
}

/** A payer's settlements, newest first. */
export async function settlementPage(
  store: Store,
  payer: Address,
  options: { first: number; after?: Keyset; status?: SettlementStatus },
): Promise<Page<Settlement>> {
  const rows = await settlementsOf(store, payer, { ...options, limit: options.first + 1 });
  return { items: rows.slice(0, options.first), hasNextPage: rows.length > options.first };
}

/** Everything a payer has used, optionally within [from, to). */
export async function usageTotals(
  store: Store,
  payer: Address,
  filter: UsageFilter = {},
): Promise<UsageTotals> {
  const row = await store.db
    .selectFrom('usage_records as u')
    .where('u.payer', '=', getAddress(payer))
    .where((eb) => usageFilter(eb, filter))
    .select(totalsSelection)
    .executeTakeFirstOrThrow();
  return readTotals(row);
}

/** Spending per UTC day (key YYYY-MM-DD) or per model, in key order. */
export async function spendBy(
  store: Store,
  payer: Address,
  groupBy: SpendGrouping,
  filter: Pick<UsageFilter, 'from' | 'to'> = {},
): Promise<Array<{ key: string; totals: UsageTotals }>> {
  const base = store.db
    .selectFrom('usage_records as u')
    .where('u.payer', '=', getAddress(payer))
    .where((eb) => usageFilter(eb, filter));
  if (groupBy === 'MODEL') {
    const rows = await base
      .select('u.model')
      .select(totalsSelection)
      .groupBy('u.model')
      .orderBy('u.model')
      .execute();
    return rows.map((row) => ({ key: row.model, totals: readTotals(row) }));
  }
  const day = sql<bigint>`u.created_at / ${sql.lit(DAY_MS)}`;
  const rows = await base.select(day.as('day')).select(totalsSelection).groupBy(day).orderBy(day).execute();
  return rows.map((row) => ({
    key: new Date(Number(row.day) * DAY_MS).toISOString().slice(0, 10),
    totals: readTotals(row),
  }));
}

/** What confirmed settlements of the payer have moved. */
export async function settledTotals(store: Store, payer: Address): Promise<SettledTotals> {
  const row = await store.db
    .selectFrom('settlements')
    .where('payer', '=', getAddress(payer))
    .where('status', '=', 'confirmed')
    .select((eb) => [eb.fn.countAll().as('settlements'), eb.fn.sum('amount_atomic').as('amount')])
    .executeTakeFirstOrThrow();
  return { settlements: Number(toBigInt(row.settlements)), amountAtomic: toBigInt(row.amount) };
}

type UsageScope = ExpressionBuilder<Database & { u: Database['usage_records'] }, 'u'>;

function usageFilter(eb: UsageScope, filter: UsageFilter) {
  const conditions = [];
  if (filter.model !== undefined) conditions.push(eb('u.model', '=', filter.model));
  if (filter.settlementId !== undefined) conditions.push(eb('u.settlement_id', '=', filter.settlementId));
  if (filter.from !== undefined) conditions.push(eb('u.created_at', '>=', BigInt(filter.from.getTime())));
  if (filter.to !== undefined) conditions.push(eb('u.created_at', '<', BigInt(filter.to.getTime())));
  return eb.and(conditions);
}

function totalsSelection(eb: UsageScope) {
  return [
    eb.fn.countAll().as('requests'),
    eb.fn.sum('u.input_tokens').as('input_tokens'),
    eb.fn.sum('u.cache_read_tokens').as('cache_read_tokens'),
    eb.fn.sum('u.cache_write_tokens').as('cache_write_tokens'),
    eb.fn.sum('u.output_tokens').as('output_tokens'),
    eb.fn.sum('u.reasoning_tokens').as('reasoning_tokens'),
    ...exactSum('u.provider_cost_pico', 'provider'),
    ...exactSum('u.commission_pico', 'commission'),
    ...exactSum('u.total_pico', 'total'),
  ];
}

type TotalsRow = Record<
  | 'requests'
  | 'input_tokens'
  | 'cache_read_tokens'
  | 'cache_write_tokens'
  | 'output_tokens'
  | 'reasoning_tokens'
  | `${'provider' | 'commission' | 'total'}_${'hi' | 'lo'}`,
  unknown
>;

function readTotals(row: TotalsRow): UsageTotals {
  return {
    requests: toBigInt(row.requests),
    inputTokens: toBigInt(row.input_tokens),
    cacheReadTokens: toBigInt(row.cache_read_tokens),
    cacheWriteTokens: toBigInt(row.cache_write_tokens),
    outputTokens: toBigInt(row.output_tokens),
    reasoningTokens: toBigInt(row.reasoning_tokens),
    providerPicoUsd: readSum(row, 'provider'),
    commissionPicoUsd: readSum(row, 'commission'),
    totalPicoUsd: readSum(row, 'total'),
  };
}
