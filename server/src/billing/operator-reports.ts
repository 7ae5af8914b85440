import { type SqlBool, sql } from 'kysely';
import type { Address } from 'viem';
import type { PaymentRail } from '../services/chat-contracts.js';
import type { Store } from '../store/database.js';
import { exactSum, readSum, toBigInt } from '../store/exact-sum.js';
import { costsSomething, isUnfinished, WEI_PER_GWEI } from './settlements.js';

const DAY_MS = 86_400_000;
/** Days the economics cover when no start is given: 30 whole UTC days, today's included. */
const DEFAULT_ECONOMICS_DAYS = 30;

/** The default start of the economics up to `to`: the start of the UTC day 29 days before `to`'s. */
export function defaultEconomicsFrom(to: Date): Date {
  return new Date((Math.floor(to.getTime() / DAY_MS) - (DEFAULT_ECONOMICS_DAYS - 1)) * DAY_MS);
}

/** What the operator earned and spent on one UTC day on one rail. */
export interface EconomicsBucket {
  /** YYYY-MM-DD (UTC). */
  day: string;
  rail: PaymentRail;
  /** Usage records made that day. */
  requests: bigint;
  /** Commission of those records, in pico-USD. */
  commissionPicoUsd: bigint;
  /** Settlements confirmed that day by a transaction. */
  settlements: number;
  /** Gas of those the gateway's relayer sent. */
  gasUsed: bigint;
  /** Wei the relayer paid for them. */
  feeWei: bigint;
}

/**
 * Commission earned (by the day its records were made) against gas spent (by the day its
 * settlements were confirmed), per UTC day and rail over [from, to), in day then rail order. Each
 * side is a range of its index (usage records by creation, confirmed settlements by confirmation).
 */
export async function economicsByDay(
  store: Store,
  range: { from: Date; to: Date },
): Promise<EconomicsBucket[]> {
  const from = BigInt(range.from.getTime());
  const to = BigInt(range.to.getTime());
  const usageDay = sql<bigint>`created_at / ${sql.lit(DAY_MS)}`;
  const settledDay = sql<bigint>`confirmed_at / ${sql.lit(DAY_MS)}`;
  const [earned, spent] = await Promise.all([
    store.db
      .selectFrom('usage_records')
      .select((eb) => [usageDay.as('day'), 'rail', eb.fn.countAll().as('requests')])
      .select(exactSum('commission_pico', 'commission'))
      .where('created_at', '>=', from)
      .where('created_at', '<', to)
      .groupBy([usageDay, 'rail'])
      .execute(),
    store.db
      .selectFrom('settlements')
      .select((eb) => [
        settledDay.as('day'),
        'rail',
        eb.fn.count('tx_hash').as('settlements'),
        eb.fn.sum('gas_used').as('gas'),
      ])
      .select([...exactSum('fee_gwei', 'feeGwei'), ...exactSum('fee_remainder_wei', 'feeRest')])
      .where(sql<SqlBool>`status = 'confirmed'`)
      .where('confirmed_at', '>=', from)
      .where('confirmed_at', '<', to)
      .groupBy([settledDay, 'rail'])
      .execute(),
  ]);
  const buckets = new Map<string, EconomicsBucket>();
  const bucket = (day: unknown, rail: PaymentRail) => {
    const key = `${new Date(Number(toBigInt(day)) * DAY_MS).toISOString().slice(0, 10)} ${rail}`;
    let found = buckets.get(key);
    if (!found) {
      found = {
        day: key.slice(0, 10),
        rail,
        requests: 0n,
        commissionPicoUsd: 0n,
        settlements: 0,
        gasUsed: 0n,
        feeWei: 0n,
      };
      buckets.set(key, found);
    }
    return found;
  };
  for (const row of earned) {
    const found = bucket(row.day, row.rail);
    found.requests = toBigInt(row.requests);
    found.commissionPicoUsd = readSum(row, 'commission');
  }
  for (const row of spent) {
    const found = bucket(row.day, row.rail);
    found.settlements = Number(toBigInt(row.settlements));
    found.gasUsed = toBigInt(row.gas);
    found.feeWei = readSum(row, 'feeGwei') * WEI_PER_GWEI + readSum(row, 'feeRest');
  }
  return [...buckets.keys()].sort().map((key) => buckets.get(key) as EconomicsBucket);
}

/** Each rail's days of `buckets` added up, in rail order. */
export function economicsByRail(buckets: EconomicsBucket[]): Array<Omit<EconomicsBucket, 'day'>> {
  const rails = new Map<PaymentRail, Omit<EconomicsBucket, 'day'>>();
  for (const { day: _day, ...bucket } of buckets) {
    const total = rails.get(bucket.rail);
    if (!total) rails.set(bucket.rail, bucket);
    else {
      total.requests += bucket.requests;
      total.commissionPicoUsd += bucket.commissionPicoUsd;
      total.settlements += bucket.settlements;
      total.gasUsed += bucket.gasUsed;
      total.feeWei += bucket.feeWei;
    }
  }
  return [...rails.keys()].sort().map((rail) => rails.get(rail) as Omit<EconomicsBucket, 'day'>);
}

/** A payer's unpaid debt, as the operator's list of the largest shows it. */
export interface Debtor {
  wallet: Address;
  /** Completed requests not paid yet (unclaimed, or claimed by a settlement in flight). */
  unpaidPicoUsd: bigint;
  /** unpaid - credit, at least 0. */
  owedPicoUsd: bigint;
  /** Whether a settlement of the payer that moved USDC was ever confirmed. */
  proven: boolean;
}

/**
 * The `limit` payers owing most, largest first, from the indexes on owed records and unfinished
 * settlements: the cost follows the open debt, not the history.
 */
export async function largestDebtors(store: Store, limit: number): Promise<Debtor[]> {
  const unpaid = store.db
    .selectFrom('usage_records')
    .select(['payer', 'total_pico as amount'])
    .where('settlement_id', 'is', null)
    .where(costsSomething('total_pico'))
    .unionAll(
      store.db
        .selectFrom('settlements')
        .select(['payer', 'records_total_pico as amount'])
        .where(isUnfinished('status')),
    );
  const rows = await store.db
    .selectFrom(unpaid.as('unpaid'))
    .select((eb) => [
      'unpaid.payer',
      ...exactSum('unpaid.amount', 'unpaid'),
      eb.selectFrom('payers').select('credit_pico').whereRef('wallet', '=', 'unpaid.payer').as('credit'),
      eb
        .exists(
          eb
            .selectFrom('settlements as s')
            .select('s.id')
            .whereRef('s.payer', '=', 'unpaid.payer')
            .where('s.status', '=', 'confirmed')
            .where('s.amount_atomic', '>', 0n),
        )
        .as('proven'),
    ])
    .groupBy('unpaid.payer')
    // In whole millions first: their sum cannot overflow int8 where the plain sum could.
    .orderBy(sql`sum(unpaid.amount / 1000000)`, 'desc')
    .orderBy(sql`sum(unpaid.amount % 1000000)`, 'desc')
    .orderBy('unpaid.payer')
    .limit(limit)
    .execute();
  return rows.map((row) => {
    const unpaidPicoUsd = readSum(row, 'unpaid');
    const credit = toBigInt(row.credit);
    return {
      wallet: row.payer,
      unpaidPicoUsd,
      owedPicoUsd: unpaidPicoUsd > credit ? unpaidPicoUsd - credit : 0n,
      proven: Boolean(row.proven),
    };
  });
}
