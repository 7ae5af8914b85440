import type { Address } from 'viem';
import type { Store } from '../../src/store/database.js';
import { insertSession } from '../../src/store/sessions.js';

/**
 * A session row whose delegation is a placeholder (never redeemed): for tests of what the ledger and
 * admission do with sessions. Lasts an hour unless `expiresAt` says otherwise.
 */
export function storePlaceholderSession(
  store: Store,
  session: { id: string; wallet: Address; limits?: object; expiresAt?: Date; createdAt?: Date },
): Promise<void> {
  return insertSession(store, {
    id: session.id,
    wallet: session.wallet,
    delegation: '{}',
    delegationHash: `0x${Buffer.from(session.id).toString('hex').padStart(64, '0')}`,
    signature: '0x',
    limits: JSON.stringify(session.limits ?? {}),
    expiresAt: session.expiresAt ?? new Date(Date.now() + 3_600_000),
    createdAt: session.createdAt,
  });
}
