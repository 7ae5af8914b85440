import type { Delegation } from '@metamask/smart-accounts-kit';
import type { Selectable } from 'kysely';
import { type Address, getAddress, type Hex } from 'viem';
import type { SessionLimits } from '../../client/types.js';
import type { Store } from '../../store/database.js';
import type { SessionsTable } from '../../store/schema.js';

/** A stored session: the payer's signed delegation to the gateway's session key. */
export interface SessionRecord {
  id: string;
  wallet: Address;
  /** As accepted (args emptied), without its signature. */
  delegation: Omit<Delegation, 'signature'>;
  delegationHash: Hex;
  /** As the payer sent it: raw, or ERC-6492-wrapped for an account not deployed then. */
  signature: Hex;
  limits: SessionLimits;
  expiresAt: Date;
  revokedAt: Date | null;
  createdAt: Date;
}

export async function findSession(store: Store, id: string): Promise<SessionRecord | undefined> {
  const row = await store.db.selectFrom('sessions').selectAll().where('id', '=', id).executeTakeFirst();
  return row && toSessionRecord(row);
}

/** The session a delegation backs, if any: a delegation backs one session only. */
export async function findSessionByDelegationHash(
  store: Store,
  hash: Hex,
): Promise<SessionRecord | undefined> {
  const row = await store.db
    .selectFrom('sessions')
    .selectAll()
    .where('delegation_hash', '=', hash)
    .executeTakeFirst();
  return row && toSessionRecord(row);
}

/**
 * The delegations that may pay a payer's debts when no request names one (the collector): those not
 * yet expired, revoked or not, newest first, at most `limit`. Revoking stops new requests; what was
 * already used is still owed under the permission the payer signed.
 */
export async function unexpiredSessions(
  store: Store,
  wallet: Address,
  { now = new Date(), limit }: { now?: Date; limit: number },
): Promise<SessionRecord[]> {
  const rows = await store.db
    .selectFrom('sessions')
    .selectAll()
    .where('wallet', '=', getAddress(wallet))
    .where('expires_at', '>', BigInt(now.getTime()))
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(limit)
    .execute();
  return rows.map(toSessionRecord);
}

function toSessionRecord(row: Selectable<SessionsTable>): SessionRecord {
  return {
    id: row.id,
    wallet: row.wallet,
    delegation: JSON.parse(row.delegation) as Omit<Delegation, 'signature'>,
    delegationHash: row.delegation_hash,
    signature: row.signature,
    limits: JSON.parse(row.limits) as SessionLimits,
    expiresAt: new Date(Number(row.expires_at)),
    revokedAt: row.revoked_at === null ? null : new Date(Number(row.revoked_at)),
    createdAt: new Date(Number(row.created_at)),
  };
}
