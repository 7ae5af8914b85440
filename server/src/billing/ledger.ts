import { type Address, getAddress } from 'viem';
import type { MeteredUsage } from '../providers/types.js';
import type { PaymentRail } from '../services/chat-contracts.js';
import type { Store } from '../store/database.js';
import { exactSum, readSum, toBigInt } from '../store/exact-sum.js';
import type { UsageRow } from '../store/usage-records.js';
import { atomicCovering } from './money.js';
import type { CostBreakdown } from './pricing.js';
import { costsSomething, isUnfinished } from './settlements.js';

export interface NewUsageRecord {
  requestId: string;
  payer: Address;
  rail: PaymentRail;
  /** Catalog model id. */
  model: string;
  usage: MeteredUsage;
  cost: CostBreakdown;
  /** Defaults to now. */
  createdAt?: Date;
}

export interface UsageRecord extends Omit<NewUsageRecord, 'createdAt'> {
  createdAt: Date;
  /** The settlement claiming it (paid once that settlement is confirmed), or null. */
  settlementId: string | null;
}

/** What a payer owes right now. Records claimed by a pending or sent settlement still count as unpaid. */
export interface Debt {
  /** Sum of the payer's records not paid by a confirmed settlement. */
  unpaidPicoUsd: bigint;
  /** Excess paid by earlier settlements (always less than one USDC atomic unit). */
  creditPicoUsd: bigint;
  /** unpaid - credit, never below 0. */
  owedPicoUsd: bigint;
  /** The USDC atomic amount a settlement of everything owed transfers (rounded up). */
  owedAtomic: bigint;
}

/** A request id reused for a different usage: the first record stands, the second is refused. */
export class UsageConflictError extends Error {
  constructor(readonly requestId: string) {
    super(`request id ${requestId} is already recorded with a different usage`);
    this.name = 'UsageConflictError';
  }
}

/**
 * Writes the usage record of one completed (or cancelled) request. Idempotent on the request id:
 * writing the same record again returns the stored one.
 */
export async function recordUsage(store: Store, entry: NewUsageRecord): Promise<UsageRecord> {
  const [result] = await recordUsages(store, [entry]);
  if (result instanceof Error) throw result;
  return result as UsageRecord;
}

/**
 * `recordUsage` for several requests in one transaction: one commit (one fsync) for all of them.
 * Each entry gets its record, or the UsageConflictError refusing it; a failing write fails them all.
 */
export async function recordUsages(
  store: Store,
  entries: readonly NewUsageRecord[],
): Promise<Array<UsageRecord | UsageConflictError>> {
  const rows = entries.map((entry) => ({
    request_id: entry.requestId,
    payer: getAddress(entry.payer),
    rail: entry.rail,
    model: entry.model,
    input_tokens: entry.usage.inputTokens,
    cache_read_tokens: entry.usage.cacheReadTokens,
    cache_write_tokens: entry.usage.cacheWriteTokens,
    output_tokens: entry.usage.outputTokens,
    reasoning_tokens: entry.usage.reasoningTokens,
    provider_cost_pico: entry.cost.providerPicoUsd,
    commission_pico: entry.cost.commissionPicoUsd,
    total_pico: entry.cost.totalPicoUsd,
    exact: entry.usage.exact ? 1 : 0,
    created_at: (entry.createdAt ?? new Date()).getTime(),
    settlement_id: null,
  }));
  const earlier = await store.insertUsageRows(rows);
  // A request id twice in one batch: the first entry's record stands for the second too.
  const recorded = new Map<string, UsageRecord>();
  return entries.map((entry, i) => {
    const row = rows[i] as (typeof rows)[number];
    const stored = earlier.get(row.request_id);
    const record =
      recorded.get(row.request_id) ??
      (stored
        ? toUsageRecord(stored)
        : {
            requestId: row.request_id,
            payer: row.payer,
            rail: entry.rail,
            model: entry.model,
            usage: entry.usage,
            cost: entry.cost,
            createdAt: new Date(row.created_at),
            settlementId: null,
          });
    recorded.set(row.request_id, record);
    return sameUsage(record, { ...entry, payer: row.payer })
      ? record
      : new UsageConflictError(entry.requestId);
  });
}

export async function findUsageRecord(store: Store, requestId: string): Promise<UsageRecord | undefined> {
  const row = await store.db
    .selectFrom('usage_records')
    .selectAll()
    .where('request_id', '=', requestId)
    .executeTakeFirst();
  return row && toUsageRecord(row);
}

/**
 * What the payer owes in USDC atomic units, for a refusal to state; undefined when the ledger
 * cannot say now (the refusal stands without the figure).
 */
export function owedAtomicIfKnown(store: Store, payer: Address): Promise<bigint | undefined> {
  return debtOf(store, payer).then(
    (debt) => debt.owedAtomic,
    () => undefined,
  );
}

export async function debtOf(store: Store, payer: Address): Promise<Debt> {
  const wallet = getAddress(payer);
  // Unclaimed records plus what in-flight settlements claimed: both come from small indexes, never
  // the payer's whole history. One statement, so they and the credit come from one snapshot.
  const unpaid = store.db
    .selectFrom('usage_records')
    .select('total_pico as amount')
    .where('payer', '=', wallet)
    .where('settlement_id', 'is', null)
    .where(costsSomething('total_pico'))
    .unionAll(
      store.db
        .selectFrom('settlements')
        .select('records_total_pico as amount')
        .where('payer', '=', wallet)
        .where(isUnfinished('status')),
    );
  const row = await store.db
    .selectFrom(unpaid.as('unpaid'))
    .select((eb) => [
      ...exactSum('unpaid.amount', 'unpaid'),
      eb.selectFrom('payers').select('credit_pico').where('wallet', '=', wallet).as('credit'),
    ])
    .executeTakeFirstOrThrow();
  const unpaidPicoUsd = readSum(row, 'unpaid');
  const creditPicoUsd = toBigInt(row.credit);
  const owedPicoUsd = unpaidPicoUsd > creditPicoUsd ? unpaidPicoUsd - creditPicoUsd : 0n;
  return { unpaidPicoUsd, creditPicoUsd, owedPicoUsd, owedAtomic: atomicCovering(owedPicoUsd) };
}

export function toUsageRecord(row: UsageRow): UsageRecord {
  return {
    requestId: row.request_id,
    payer: row.payer,
    rail: row.rail,
    model: row.model,
    usage: {
      inputTokens: Number(row.input_tokens),
      cacheReadTokens: Number(row.cache_read_tokens),
      cacheWriteTokens: Number(row.cache_write_tokens),
      outputTokens: Number(row.output_tokens),
      reasoningTokens: Number(row.reasoning_tokens),
      exact: row.exact === 1n,
    },
    cost: {
      providerPicoUsd: row.provider_cost_pico,
      commissionPicoUsd: row.commission_pico,
      totalPicoUsd: row.total_pico,
    },
    createdAt: new Date(Number(row.created_at)),
    settlementId: row.settlement_id,
  };
}

function sameUsage(stored: UsageRecord, entry: NewUsageRecord): boolean {
  const a = stored.usage;
  const b = entry.usage;
  return (
    stored.payer === entry.payer &&
    stored.rail === entry.rail &&
    stored.model === entry.model &&
    a.inputTokens === b.inputTokens &&
    a.cacheReadTokens === b.cacheReadTokens &&
    a.cacheWriteTokens === b.cacheWriteTokens &&
    a.outputTokens === b.outputTokens &&
    a.reasoningTokens === b.reasoningTokens &&
    a.exact === b.exact &&
    stored.cost.totalPicoUsd === entry.cost.totalPicoUsd
  );
}
