import {
  type ExpressionBuilder,
  type QueryCreator,
  type Selectable,
  type SqlBool,
  sql,
  type Transaction,
} from 'kysely';
import { type Address, getAddress, type Hex } from 'viem';
import type { PaymentRail } from '../services/chat-contracts.js';
import type { Store } from '../store/database.js';
import { toBigInt } from '../store/exact-sum.js';
import { preparedQuery } from '../store/prepared-query.js';
import type { Database, SettlementStatusColumn, SettlementsTable } from '../store/schema.js';
import { addSessionPaid, selectActiveSession } from '../store/sessions.js';
import { timeOrderedId } from '../store/time-ordered-id.js';
import { atomicCovering, PICO_PER_ATOMIC } from './money.js';

export type SettlementStatus = SettlementStatusColumn;

/**
 * One payment of a payer's records, written before its transaction is sent (the outbox).
 * Over a payer's history: sum(confirmed amountAtomic) * 1e6 - current credit = sum of paid records.
 */
export interface Settlement {
  id: string;
  payer: Address;
  rail: PaymentRail;
  status: SettlementStatus;
  /** USDC atomic units to transfer: the debt rounded up to a whole unit. */
  amountAtomic: bigint;
  /** Sum of the claimed records' totals. */
  recordsTotalPicoUsd: bigint;
  recordCount: number;
  /** The payer's credit when opened; used up by this settlement. */
  creditBeforePicoUsd: bigint;
  /** The rounding excess, credited to the payer's next settlement once this one is confirmed. */
  carriedPicoUsd: bigint;
  /** The transaction sent last; once confirmed, the one mined. */
  txHash: Hex | null;
  /** Transactions `txHash` replaced with higher fees, under the same nonce, oldest first. */
  replacedTxHashes: Hex[];
  /** The treasury it pays: the one configured when it was opened (null: opened before this was recorded). */
  payTo: Address | null;
  blockNumber: bigint | null;
  /** Gas its transaction used when the gateway's relayer sent it; null when another key did, or none was sent. */
  gasUsed: bigint | null;
  /** Wei the operator paid for it (0 when a remote facilitator sent it); null when not known. */
  feeWei: bigint | null;
  failureReason: string | null;
  createdAt: Date;
  updatedAt: Date;
  sentAt: Date | null;
  confirmedAt: Date | null;
  failedAt: Date | null;
}

/** The payer already has a pending or sent settlement: reconcile or finish it first. */
export class SettlementInProgressError extends Error {
  constructor(readonly settlement: Settlement) {
    super(`payer ${settlement.payer} already has settlement ${settlement.id} ${settlement.status}`);
    this.name = 'SettlementInProgressError';
  }
}

/** A transition the settlement's status does not allow (e.g. confirming a failed one), or an unknown id. */
export class SettlementStateError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SettlementStateError';
  }
}

const UNFINISHED: SettlementStatus[] = ['pending', 'sent'];

/**
 * `status in ('pending', 'sent')` with the values as SQL text: only then do the planners use the
 * partial indexes on unfinished settlements (bound parameters would scan the payer's history).
 */
export function isUnfinished(column: 'status' | 's.status') {
  return sql<SqlBool>`${sql.ref(column)} in ('pending', 'sent')`;
}

/** `total_pico > 0` as SQL text, so that the partial index on records owing something is used. */
export function costsSomething(column: 'total_pico' | 'u.total_pico') {
  return sql<SqlBool>`${sql.ref(column)} > 0`;
}

/**
 * Whether the payer (checksummed) may have something to settle: a record costing anything not
 * claimed yet, or a settlement in flight. Read-only and answered from two small partial indexes, so
 * the common case (nothing owed) takes no lock. Records costing 0 stay unclaimed until a settlement
 * claims them with the payer's next paid ones: they are owed nothing either way.
 */
export async function mayOwe(store: Store, wallet: Address): Promise<boolean> {
  const [row] = await owedOrUnfinished(store, { wallet });
  return Boolean(row?.owed) || Boolean(row?.unfinished);
}

/** A record of the payer costing something and not claimed yet (partial index). */
const selectOwedRecord = (db: QueryCreator<Database>, wallet: Address) =>
  db
    .selectFrom('usage_records')
    .select('request_id')
    .where('payer', '=', wallet)
    .where('settlement_id', 'is', null)
    .where(costsSomething('total_pico'));

/** A settlement of the payer in flight (partial index). */
const selectUnfinishedSettlement = (db: QueryCreator<Database>, wallet: Address) =>
  db.selectFrom('settlements').select('id').where('payer', '=', wallet).where(isUnfinished('status'));

const owedOrUnfinished = preparedQuery<{ wallet: Address }, { owed: SqlBool; unfinished: SqlBool }>(
  (db, parameter) =>
    db.selectNoFrom((eb) => [
      eb.exists(selectOwedRecord(db, parameter('wallet'))).as('owed'),
      eb.exists(selectUnfinishedSettlement(db, parameter('wallet'))).as('unfinished'),
    ]),
);

/** A column of the session `id`'s row, as a scalar subquery (null when there is no such session). */
const sessionColumn = (
  db: QueryCreator<Database>,
  id: string,
  column: 'paid_atomic' | 'period_paid_atomic' | 'paid_period',
) => db.selectFrom('sessions').select(column).where('id', '=', id);

// Asked on every chat request of the session rail, in one round trip.
const activeAndOwing = preparedQuery<
  { id: string; wallet: Address; now: bigint },
  {
    active: SqlBool;
    owed: SqlBool;
    unfinished: SqlBool;
    paid: unknown;
    periodPaid: unknown;
    paidPeriod: unknown;
  }
>((db, parameter) => {
  const id = parameter('id');
  const wallet = parameter('wallet');
  return db.selectNoFrom((eb) => [
    eb.exists(selectActiveSession(db, { id, wallet, now: parameter('now') })).as('active'),
    eb.exists(selectOwedRecord(db, wallet)).as('owed'),
    eb.exists(selectUnfinishedSettlement(db, wallet)).as('unfinished'),
    sessionColumn(db, id, 'paid_atomic').as('paid'),
    sessionColumn(db, id, 'period_paid_atomic').as('periodPaid'),
    sessionColumn(db, id, 'paid_period').as('paidPeriod'),
  ]);
});

/** What a session's delegation paid: the running totals its confirmed settlements keep. */
export interface SessionPaid {
  /** USDC atomic units its confirmed settlements moved. */
  paidAtomic: bigint;
  /** The part of `paidAtomic` confirmed in period `paidPeriod` of its per-period cap. */
  periodPaidAtomic: bigint;
  /** The index of the period `periodPaidAtomic` counts (null: nothing paid in any period yet). */
  paidPeriod: bigint | null;
}

/** A session's standing, as admission reads it before every request of the session rail. */
export interface SessionStanding {
  /** The session exists for that wallet, not revoked, not expired (auth's `isSessionActive`). */
  active: boolean;
  /** The payer may owe something (`mayOwe`). */
  mayOwe: boolean;
  /** What the session's delegation paid: exact when nothing is owed or in flight. */
  paid: SessionPaid;
}

/**
 * Whether the session stands, whether its payer may owe anything and what its delegation paid,
 * from one statement: all asked before every request the session rail forwards. The totals are
 * read from the session's row, never cached: another instance may confirm a settlement meanwhile.
 */
export async function sessionStanding(
  store: Store,
  query: { sessionId: string; wallet: Address; now?: Date },
): Promise<SessionStanding> {
  const [row] = await activeAndOwing(store, {
    id: query.sessionId,
    wallet: getAddress(query.wallet),
    now: BigInt((query.now ?? new Date()).getTime()),
  });
  return {
    active: Boolean(row?.active),
    mayOwe: Boolean(row?.owed) || Boolean(row?.unfinished),
    paid: {
      paidAtomic: toBigInt(row?.paid),
      periodPaidAtomic: toBigInt(row?.periodPaid),
      paidPeriod: row?.paidPeriod === null || row?.paidPeriod === undefined ? null : toBigInt(row.paidPeriod),
    },
  };
}

/**
 * Claims every unclaimed record of the payer into a new `pending` settlement and returns it, or
 * null when nothing is owed. `sessionId`: the session whose delegation pays it (session rail), whose
 * totals its confirmation adds to. When the payer's credit covers its records they are paid by the
 * credit at once (a confirmed settlement of 0) and null is returned. Safe under concurrency:
 * the payer's row is locked for the transaction and a payer has at most one unfinished settlement.
 */
export async function openSettlement(
  store: Store,
  payer: Address,
  rail: PaymentRail,
  payTo?: Address,
  sessionId?: string,
): Promise<Settlement | null> {
  const wallet = getAddress(payer);
  if (!(await mayOwe(store, wallet))) return null;
  return store.db.transaction().execute(async (trx) => {
    // A write first: locks the payer's row in PostgreSQL and takes SQLite's write lock up front.
    const payerRow = await trx
      .updateTable('payers')
      .set((eb) => ({ credit_pico: eb.ref('credit_pico') }))
      .where('wallet', '=', wallet)
      .returning('credit_pico')
      .executeTakeFirst();
    if (!payerRow) return null;
    const unfinished = await trx
      .selectFrom('settlements')
      .selectAll()
      .where('payer', '=', wallet)
      .where(isUnfinished('status'))
      .executeTakeFirst();
    if (unfinished) throw new SettlementInProgressError(toSettlement(unfinished));
    const anyUnclaimed = await trx
      .selectFrom('usage_records')
      .select('request_id')
      .where('payer', '=', wallet)
      .where('settlement_id', 'is', null)
      .where(costsSomething('total_pico'))
      .limit(1)
      .executeTakeFirst();
    if (!anyUnclaimed) return null;

    // Time-ordered, like request ids: the records it claims are indexed by it.
    const id = timeOrderedId();
    // A payer's settlements are listed newest first by creation time, so two opened within one
    // millisecond (a credit-paid one, then the next) must not share it.
    const latest = await trx
      .selectFrom('settlements')
      .select((eb) => eb.fn.max('created_at').as('at'))
      .where('payer', '=', wallet)
      .executeTakeFirst();
    const now = Math.max(Date.now(), Number(latest?.at ?? 0) + 1);
    await trx
      .insertInto('settlements')
      .values({
        id,
        payer: wallet,
        rail,
        status: 'pending',
        amount_atomic: 0,
        records_total_pico: 0,
        record_count: 0,
        credit_before_pico: payerRow.credit_pico,
        carried_pico: 0,
        pay_to: payTo ?? null,
        session_id: sessionId ?? null,
        created_at: now,
        updated_at: now,
      })
      .execute();
    // The claim returns exactly what it took, so the amount matches the claimed set even if
    // records were inserted meanwhile.
    const claimed = await trx
      .updateTable('usage_records')
      .set({ settlement_id: id })
      .where('payer', '=', wallet)
      .where('settlement_id', 'is', null)
      .returning('total_pico')
      .execute();
    const recordsTotal = claimed.reduce((sum, record) => sum + record.total_pico, 0n);
    const owed = recordsTotal - payerRow.credit_pico;
    const amountAtomic = atomicCovering(owed);
    const carried = amountAtomic * PICO_PER_ATOMIC - owed;
    const settled = await trx
      .updateTable('settlements')
      .set({
        amount_atomic: amountAtomic,
        records_total_pico: recordsTotal,
        record_count: claimed.length,
        carried_pico: carried,
        ...(amountAtomic === 0n ? { status: 'confirmed' as const, confirmed_at: now } : {}),
      })
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirstOrThrow();
    if (amountAtomic > 0n) return toSettlement(settled);
    await creditPayer(trx, settled);
    return null;
  });
}

/**
 * Stores the hash of the transaction that pays the settlement (again with a replacement hash), and
 * the signed transaction itself when the gateway signed it (`raw`), so it can be broadcast again.
 */
export async function markSettlementSent(
  store: Store,
  id: string,
  txHash: Hex,
  raw?: Hex,
): Promise<Settlement> {
  const now = Date.now();
  const row = await store.db
    .updateTable('settlements')
    .set((eb) => ({
      status: 'sent',
      tx_hash: txHash,
      ...(raw === undefined ? {} : { tx_raw: raw }),
      sent_at: eb.fn.coalesce('sent_at', eb.val(now)),
      updated_at: now,
    }))
    .where('id', '=', id)
    .where('status', 'in', UNFINISHED)
    .returningAll()
    .executeTakeFirst();
  if (row) return toSettlement(row);
  return unchangedOrThrow(store, id, 'sent', (s) => s.status === 'confirmed' && s.txHash === txHash);
}

/**
 * The outbox write before a broadcast: the signed transaction that pays the pending settlements
 * `ids` (one, or a batch of different payers') stored on each, all `sent` on its hash, or none.
 * `resigned`: a settlement already sent may be among them, its transaction refused for its nonce
 * (never broadcast) and signed anew (x402, as markSettlementSent).
 */
export async function markSettlementsSent(
  store: Store,
  ids: readonly string[],
  tx: { hash: Hex; raw: Hex },
  options: { resigned?: boolean } = {},
): Promise<void> {
  const now = Date.now();
  await store.db.transaction().execute(async (trx) => {
    const sent = await trx
      .updateTable('settlements')
      .set((eb) => ({
        status: 'sent',
        tx_hash: tx.hash,
        tx_raw: tx.raw,
        sent_at: eb.fn.coalesce('sent_at', eb.val(now)),
        updated_at: now,
      }))
      .where('id', 'in', ids)
      .where('status', 'in', options.resigned ? UNFINISHED : ['pending'])
      .returning('id')
      .execute();
    if (sent.length !== ids.length)
      throw new SettlementStateError(
        `settlements ${ids.join(', ')} are not all ${options.resigned ? 'unfinished' : 'pending'} any more`,
      );
  });
}

/**
 * The payment was refused with nothing sent for it, but whether anything else paid it is not known
 * yet (x402: whether anyone used its authorization): `reason` is kept on the pending settlement for
 * whoever finishes it. Nothing changes once it was sent or finished.
 */
export async function markSettlementRefused(store: Store, id: string, reason: string): Promise<void> {
  await store.db
    .updateTable('settlements')
    .set({ failure_reason: reason, updated_at: Date.now() })
    .where('id', '=', id)
    .where('status', '=', 'pending')
    .where('tx_hash', 'is', null)
    .execute();
}

/**
 * A sent settlement's transaction replaced by `tx` (the same nonce, higher fees): recorded before it
 * is broadcast, the replaced hash kept, since either transaction may be the one mined; so are the
 * other settlements sent in the same transaction (a batch). Throws SettlementStateError when the
 * settlement no longer waits on `replaced`.
 */
export async function replaceSettlementTransaction(
  store: Store,
  id: string,
  replaced: Hex,
  tx: { hash: Hex; raw: Hex },
): Promise<Settlement> {
  const row = await store.db.transaction().execute(async (trx) => {
    const replace = () =>
      trx
        .updateTable('settlements')
        .set({
          tx_hash: tx.hash,
          tx_raw: tx.raw,
          replaced_tx_hashes: sql<string>`coalesce(${sql.ref('replaced_tx_hashes')} || ',', '') || ${replaced}`,
          updated_at: Date.now(),
        })
        .where('status', '=', 'sent')
        .where('tx_hash', '=', replaced);
    const own = await replace().where('id', '=', id).returningAll().executeTakeFirst();
    // The other settlements of a batch wait on the same transaction: they follow it to its replacement.
    if (own) await replace().execute();
    return own;
  });
  if (!row) throw new SettlementStateError(`settlement ${id} no longer waits on ${replaced}`);
  return toSettlement(row);
}

/** What confirms a settlement: its mined transaction, and what that cost the operator (see `Settlement`). */
export interface SettlementReceipt {
  txHash: Hex;
  blockNumber?: bigint;
  gasUsed?: bigint | null;
  feeWei?: bigint | null;
}

/** The transaction is final: the records are paid and the rounding excess becomes the payer's credit. */
export async function confirmSettlement(
  store: Store,
  id: string,
  receipt: SettlementReceipt,
): Promise<Settlement> {
  const now = Date.now();
  const confirmed = await store.db.transaction().execute(async (trx) => {
    const row = await trx
      .updateTable('settlements')
      .set({
        status: 'confirmed',
        tx_hash: receipt.txHash,
        block_number: receipt.blockNumber ?? null,
        gas_used: receipt.gasUsed ?? null,
        ...feeColumns(receipt.feeWei ?? null),
        confirmed_at: now,
        updated_at: now,
      })
      .where('id', '=', id)
      .where('status', 'in', UNFINISHED)
      .returningAll()
      .executeTakeFirst();
    // Only the transition from unfinished counts: a second confirmation changes no row.
    if (!row) return row;
    await creditPayer(trx, row);
    // By the confirmation's time, not the block's (the receipt has no timestamp; reading the block
    // is another call to the node): it is never before the block's, so a transfer mined just
    // before a period ends may be counted in the next one, which then looks fuller than it is.
    if (row.session_id !== null && row.amount_atomic > 0n)
      await addSessionPaid(trx, row.session_id, row.amount_atomic, now);
    return row;
  });
  if (confirmed) return toSettlement(confirmed);
  return unchangedOrThrow(
    store,
    id,
    'confirmed',
    (s) => s.status === 'confirmed' && s.txHash === receipt.txHash,
  );
}

/**
 * The payment did not happen (reverted, refused, never mined): its records are unclaimed again
 * and the payer's credit is what it was. Only call it once the transaction cannot land any more.
 * With `readAs`, the state that decision was read from, it is failed only while it still stands
 * so: a settlement another holder of the payer sent or replaced meanwhile (its lock lost) is not
 * failed on a stale look, which would claim its records again for a second payment; that throws a
 * SettlementStateError.
 */
export async function failSettlement(
  store: Store,
  id: string,
  reason: string,
  readAs?: Pick<Settlement, 'status' | 'txHash'>,
): Promise<Settlement> {
  const now = Date.now();
  const failed = await store.db.transaction().execute(async (trx) => {
    let update = trx
      .updateTable('settlements')
      .set({ status: 'failed', failure_reason: reason, failed_at: now, updated_at: now })
      .where('id', '=', id)
      .where('status', 'in', UNFINISHED);
    if (readAs)
      update = update
        .where('status', '=', readAs.status)
        .where('tx_hash', readAs.txHash === null ? 'is' : '=', readAs.txHash);
    const row = await update.returningAll().executeTakeFirst();
    if (row)
      await trx
        .updateTable('usage_records')
        .set({ settlement_id: null })
        .where('settlement_id', '=', id)
        .execute();
    return row;
  });
  if (failed) return toSettlement(failed);
  return unchangedOrThrow(store, id, 'failed', (s) => s.status === 'failed');
}

export async function findSettlement(store: Store, id: string): Promise<Settlement | undefined> {
  const row = await store.db.selectFrom('settlements').selectAll().where('id', '=', id).executeTakeFirst();
  return row && toSettlement(row);
}

/**
 * Pending and sent settlements, oldest first: what start-up reconciles against the chain. Only those
 * of `rail`, and last touched before `olderThan`, when given.
 */
export async function listUnfinishedSettlements(
  store: Store,
  filter: { rail?: PaymentRail; olderThan?: Date } = {},
): Promise<Settlement[]> {
  let query = store.db.selectFrom('settlements').selectAll().where('status', 'in', UNFINISHED);
  if (filter.rail) query = query.where('rail', '=', filter.rail);
  if (filter.olderThan) query = query.where('updated_at', '<', BigInt(filter.olderThan.getTime()));
  const rows = await query.orderBy('created_at').orderBy('id').execute();
  return rows.map(toSettlement);
}

/** When the collector settles a payer's debt without waiting for another request of the payer. */
export interface CollectionDue {
  /** Once the payer's newest unclaimed record is this old. */
  idleMs: number;
  /**
   * At once, however recent its records, when the payer has an unexpired session to collect with
   * but every one of its sessions ends (expires, or was revoked) within this from now: neither its
   * next request nor the idle wait may then come while a delegation can still pay.
   */
  sessionsEndingWithinMs: number;
}

/**
 * Payers with unclaimed records costing something, no settlement in flight, and a collection due:
 * what the collector settles. In address order, those after `after` when given: a keyset on a key
 * that never changes, so a caller can walk through any number of them page by page, each page a
 * range of the unclaimed-records index; a payer's sessions are looked up by wallet and expiry.
 */
export async function collectableDebtors(
  store: Store,
  due: CollectionDue,
  options: { now?: Date; limit?: number; rail?: PaymentRail; after?: Address } = {},
): Promise<Address[]> {
  const now = (options.now ?? new Date()).getTime();
  let query = store.db
    .selectFrom('usage_records as u')
    .select('u.payer')
    .where('u.settlement_id', 'is', null)
    .where(costsSomething('u.total_pico'));
  // The session rail's collector can only collect records made on that rail.
  if (options.rail) query = query.where('u.rail', '=', options.rail);
  if (options.after) query = query.where('u.payer', '>', options.after);
  const rows = await query
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('settlements as s')
            .select('s.id')
            .whereRef('s.payer', '=', 'u.payer')
            .where(isUnfinished('s.status')),
        ),
      ),
    )
    .groupBy('u.payer')
    .having((eb) => {
      const sessionsOutlasting = (at: number) =>
        eb
          .selectFrom('sessions as s')
          .select('s.id')
          .whereRef('s.wallet', '=', 'u.payer')
          .where('s.expires_at', '>', BigInt(at));
      return eb.or([
        eb(eb.fn.max('u.created_at'), '<=', BigInt(now - due.idleMs)),
        eb.and([
          eb.exists(sessionsOutlasting(now)),
          eb.not(
            eb.exists(sessionsOutlasting(now + due.sessionsEndingWithinMs).where('s.revoked_at', 'is', null)),
          ),
        ]),
      ]);
    })
    .orderBy('u.payer')
    .limit(options.limit ?? 100)
    .execute();
  return rows.map((row) => row.payer);
}

/** A position in a newest-first listing: the last item seen. */
export interface Keyset {
  createdAt: Date;
  id: string;
}

/** Whether a settlement of the payer that moved USDC was confirmed: the payer has paid before. */
export async function hasPaid(store: Store, payer: Address): Promise<boolean> {
  const row = await store.db
    .selectFrom('settlements')
    .select('id')
    .where('payer', '=', payer)
    .where('status', '=', 'confirmed')
    .where('amount_atomic', '>', 0n)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

/** A payer's settlements, newest first (after `after`, when given). */
export async function settlementsOf(
  store: Store,
  payer: Address,
  options: { status?: SettlementStatus; limit?: number; after?: Keyset } = {},
): Promise<Settlement[]> {
  let query = store.db
    .selectFrom('settlements')
    .selectAll()
    .where('payer', '=', getAddress(payer))
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(options.limit ?? 50);
  if (options.status) query = query.where('status', '=', options.status);
  if (options.after) query = query.where(olderThan(options.after));
  return (await query.execute()).map(toSettlement);
}

/**
 * Every payer's settlements in `status` other than confirmed, newest first (after `after`, when
 * given): what the operator watches. The status is SQL text, so the partial indexes on unfinished
 * and on failed settlements serve it.
 */
export async function settlementsIn(
  store: Store,
  status: Exclude<SettlementStatus, 'confirmed'>,
  options: { limit: number; after?: Keyset },
): Promise<Settlement[]> {
  let query = store.db
    .selectFrom('settlements')
    .selectAll()
    .where(status === 'failed' ? sql<SqlBool>`status = 'failed'` : isUnfinished('status'))
    .where('status', '=', status)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(options.limit);
  if (options.after) query = query.where(olderThan(options.after));
  return (await query.execute()).map(toSettlement);
}

/** Settlements listed newest first that come after `after`. */
const olderThan = (after: Keyset) => (eb: ExpressionBuilder<Database, 'settlements'>) => {
  const at = BigInt(after.createdAt.getTime());
  return eb.or([eb('created_at', '<', at), eb.and([eb('created_at', '=', at), eb('id', '<', after.id)])]);
};

async function creditPayer(trx: Transaction<Database>, settlement: Selectable<SettlementsTable>) {
  await trx
    .updateTable('payers')
    .set((eb) => ({
      credit_pico: eb(
        'credit_pico',
        '+',
        settlement.amount_atomic * PICO_PER_ATOMIC - settlement.records_total_pico,
      ),
    }))
    .where('wallet', '=', settlement.payer)
    .execute();
}

async function unchangedOrThrow(
  store: Store,
  id: string,
  wanted: SettlementStatus,
  alreadyDone: (settlement: Settlement) => boolean,
): Promise<Settlement> {
  const current = await findSettlement(store, id);
  if (!current) throw new SettlementStateError(`settlement ${id} does not exist`);
  if (alreadyDone(current)) return current;
  throw new SettlementStateError(`settlement ${id} is ${current.status}; it cannot become ${wanted}`);
}

export const WEI_PER_GWEI = 1_000_000_000n;

/** A fee in the two columns that hold it (see SettlementsTable.fee_gwei). */
function feeColumns(feeWei: bigint | null) {
  if (feeWei === null) return { fee_gwei: null, fee_remainder_wei: null };
  return { fee_gwei: feeWei / WEI_PER_GWEI, fee_remainder_wei: feeWei % WEI_PER_GWEI };
}

export function toSettlement(row: Selectable<SettlementsTable>): Settlement {
  const date = (ms: bigint | null) => (ms === null ? null : new Date(Number(ms)));
  return {
    id: row.id,
    payer: row.payer,
    rail: row.rail,
    status: row.status,
    amountAtomic: row.amount_atomic,
    recordsTotalPicoUsd: row.records_total_pico,
    recordCount: Number(row.record_count),
    creditBeforePicoUsd: row.credit_before_pico,
    carriedPicoUsd: row.carried_pico,
    txHash: row.tx_hash,
    replacedTxHashes: row.replaced_tx_hashes ? (row.replaced_tx_hashes.split(',') as Hex[]) : [],
    payTo: row.pay_to,
    blockNumber: row.block_number,
    gasUsed: row.gas_used,
    feeWei: row.fee_gwei === null ? null : row.fee_gwei * WEI_PER_GWEI + (row.fee_remainder_wei ?? 0n),
    failureReason: row.failure_reason,
    createdAt: new Date(Number(row.created_at)),
    updatedAt: new Date(Number(row.updated_at)),
    sentAt: date(row.sent_at),
    confirmedAt: date(row.confirmed_at),
    failedAt: date(row.failed_at),
  };
}
