import { type QueryCreator, sql, type Transaction } from 'kysely';
import { type Address, getAddress, type Hex } from 'viem';
import type { Store } from './database.js';
import { preparedQuery } from './prepared-query.js';
import type { Database } from './schema.js';

/** A payer's authorization of the gateway's session key (an ERC-7710 delegation), as stored. */
export interface NewSession {
  id: string;
  wallet: Address;
  /** The signed delegation, serialized. */
  delegation: string;
  delegationHash: Hex;
  signature: Hex;
  /** The caveats the gateway accepted, serialized. */
  limits: string;
  expiresAt: Date;
  createdAt?: Date;
}

/** Stores a session, creating its payer; a delegation can back one session only (unique hash). */
export async function insertSession(store: Store, session: NewSession): Promise<void> {
  const wallet = getAddress(session.wallet);
  const createdAt = (session.createdAt ?? new Date()).getTime();
  await store.db.transaction().execute(async (trx) => {
    await trx
      .insertInto('payers')
      .values({ wallet, credit_pico: 0, created_at: createdAt })
      .onConflict((conflict) => conflict.column('wallet').doNothing())
      .execute();
    await trx
      .insertInto('sessions')
      .values({
        id: session.id,
        wallet,
        delegation: session.delegation,
        delegation_hash: session.delegationHash,
        signature: session.signature,
        limits: session.limits,
        expires_at: session.expiresAt.getTime(),
        revoked_at: null,
        created_at: createdAt,
      })
      .execute();
  });
}

/** The session if it stands: exists for that wallet (checksummed), not revoked, not expired at `now` (ms). */
export function selectActiveSession(
  db: QueryCreator<Database>,
  match: { id: string; wallet: Address; now: bigint },
) {
  return db
    .selectFrom('sessions')
    .select('id')
    .where('id', '=', match.id)
    .where('wallet', '=', match.wallet)
    .where('revoked_at', 'is', null)
    .where('expires_at', '>', match.now);
}

const activeSession = preparedQuery<{ id: string; wallet: Address; now: bigint }, { id: string }>(
  (db, parameter) =>
    selectActiveSession(db, { id: parameter('id'), wallet: parameter('wallet'), now: parameter('now') }),
);

/** Exists for that wallet, not revoked, not expired. */
export async function isSessionActive(
  store: Store,
  sessionId: string,
  wallet: Address,
  now = new Date(),
): Promise<boolean> {
  const rows = await activeSession(store, {
    id: sessionId,
    wallet: getAddress(wallet),
    now: BigInt(now.getTime()),
  });
  return rows.length > 0;
}

export async function revokeSession(store: Store, sessionId: string, now = new Date()): Promise<void> {
  await store.db
    .updateTable('sessions')
    .set({ revoked_at: now.getTime() })
    .where('id', '=', sessionId)
    .where('revoked_at', 'is', null)
    .execute();
}

/** A per-period cap's clock, as its caveat states it (`SessionLimits['period']`). */
export interface PeriodClock {
  /** ISO date the first period starts. */
  startsAt: string;
  periodSeconds: number;
}

/**
 * The index of the period `at` (ms) falls in: whole periods since the cap's start, as the enforcer
 * counts them (0 before the start).
 */
export function periodIndex(period: PeriodClock, at: number): bigint {
  const elapsed = Math.max(0, at - Date.parse(period.startsAt));
  return BigInt(Math.floor(elapsed / (period.periodSeconds * 1000)));
}

/**
 * Adds a confirmed settlement's `amountAtomic` to what the session's delegation paid, in the
 * transaction that confirms it (so every instance on the store reads the same totals), and to what
 * it paid in the period of its per-period cap `at` (ms) falls in: a later period starts its count
 * again from this amount; an earlier one than counted (confirmations racing across a boundary) is
 * over, so left out of it.
 */
export async function addSessionPaid(
  trx: Transaction<Database>,
  sessionId: string,
  amountAtomic: bigint,
  at: number,
): Promise<void> {
  const session = await trx
    .selectFrom('sessions')
    .select('limits')
    .where('id', '=', sessionId)
    .executeTakeFirst();
  if (!session) return;
  const period = (JSON.parse(session.limits) as { period?: PeriodClock }).period;
  const paid = sql.ref('paid_atomic');
  const periodPaid = sql.ref('period_paid_atomic');
  const paidPeriod = sql.ref('paid_period');
  const index = period ? periodIndex(period, at) : undefined;
  await trx
    .updateTable('sessions')
    .set({
      paid_atomic: sql<bigint>`${paid} + ${amountAtomic}`,
      ...(index !== undefined && {
        period_paid_atomic: sql<bigint>`case when ${paidPeriod} = ${index} then ${periodPaid} + ${amountAtomic} when ${paidPeriod} > ${index} then ${periodPaid} else ${amountAtomic} end`,
        paid_period: sql<bigint>`case when ${paidPeriod} > ${index} then ${paidPeriod} else ${index} end`,
      }),
    })
    .where('id', '=', sessionId)
    .execute();
}

/**
 * Deletes up to `limit` sessions that never paid and are no longer of use: nothing confirmed through
 * them, no settlement opened through them, no session-rail record of their payer since they were
 * authorized, and expired at `now`, revoked, or authorized before `unusedSince` (ms). A signed
 * delegation costs its payer nothing, so unpaid sessions would otherwise pile up. Returns the count.
 */
export async function pruneUnpaidSessions(
  store: Store,
  bounds: { now: number; unusedSince: number; limit: number },
): Promise<number> {
  const result = await store.db
    .deleteFrom('sessions')
    .where('id', 'in', (db) =>
      db
        .selectFrom('sessions as s')
        .select('s.id')
        .where('s.paid_atomic', '=', 0n)
        .where((eb) =>
          eb.or([
            eb('s.expires_at', '<=', BigInt(bounds.now)),
            eb('s.revoked_at', 'is not', null),
            eb('s.created_at', '<', BigInt(bounds.unusedSince)),
          ]),
        )
        .where(({ not, exists, selectFrom }) =>
          not(
            exists(
              selectFrom('settlements')
                .select('settlements.id')
                .whereRef('settlements.payer', '=', 's.wallet')
                .whereRef('settlements.session_id', '=', 's.id'),
            ),
          ),
        )
        .where(({ not, exists, selectFrom }) =>
          not(
            exists(
              selectFrom('usage_records')
                .select('usage_records.request_id')
                .whereRef('usage_records.payer', '=', 's.wallet')
                .whereRef('usage_records.created_at', '>=', 's.created_at')
                .where('usage_records.rail', '=', 'session'),
            ),
          ),
        )
        .limit(bounds.limit),
    )
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
