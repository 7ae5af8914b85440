import type { QueryCreator } from 'kysely';
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
