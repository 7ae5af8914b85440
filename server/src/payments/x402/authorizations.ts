import type { Selectable } from 'kysely';
import { type Address, getAddress, type Hash, type Hex } from 'viem';
import type { Store } from '../../store/database.js';
import type { X402AuthorizationsTable } from '../../store/schema.js';

/**
 * The replay guard: every authorization the gateway accepted, keyed as the contract that spends it
 * keys its nonces (asset, authorizer, nonce): the token for an EIP-3009 authorization, Permit2 for
 * an `upto` permit. In the database, so a proof is accepted once across restarts and across
 * gateway instances.
 */
export interface SeenAuthorization {
  asset: Address;
  payer: Address;
  nonce: Hex;
  valueAtomic: bigint;
  validBefore: bigint;
  /** The settlement it pays; null for a zero-value proof, which only names its payer. */
  settlementId: string | null;
  txHash: Hash | null;
  fromBlock: bigint | null;
}

export type NewAuthorization = Omit<SeenAuthorization, 'txHash'>;

/** Records the authorization; false when it was recorded before (a replay). */
export async function recordAuthorization(store: Store, authorization: NewAuthorization): Promise<boolean> {
  const inserted = await store.db
    .insertInto('x402_authorizations')
    .values({
      asset: getAddress(authorization.asset),
      payer: getAddress(authorization.payer),
      nonce: authorization.nonce.toLowerCase() as Hex,
      value_atomic: authorization.valueAtomic,
      valid_before: authorization.validBefore,
      settlement_id: authorization.settlementId,
      tx_hash: null,
      from_block: authorization.fromBlock,
      created_at: Date.now(),
    })
    .onConflict((conflict) => conflict.columns(['asset', 'payer', 'nonce']).doNothing())
    .returning('nonce')
    .executeTakeFirst();
  return inserted !== undefined;
}

export async function isAuthorizationSeen(
  store: Store,
  key: { asset: Address; payer: Address; nonce: Hex },
): Promise<boolean> {
  const row = await store.db
    .selectFrom('x402_authorizations')
    .select('nonce')
    .where('asset', '=', getAddress(key.asset))
    .where('payer', '=', getAddress(key.payer))
    .where('nonce', '=', key.nonce.toLowerCase() as Hex)
    .executeTakeFirst();
  return row !== undefined;
}

export async function authorizationOfSettlement(
  store: Store,
  settlementId: string,
): Promise<SeenAuthorization | undefined> {
  const row = await store.db
    .selectFrom('x402_authorizations')
    .selectAll()
    .where('settlement_id', '=', settlementId)
    .executeTakeFirst();
  return row && toSeenAuthorization(row);
}

/**
 * An `upto` permit, recorded when its request was admitted, pays the settlement opened once the
 * request completed; its use is looked for on chain from `fromBlock`.
 */
export async function attachAuthorization(
  store: Store,
  key: { asset: Address; payer: Address; nonce: Hex },
  settlement: { id: string; fromBlock: bigint },
): Promise<void> {
  await store.db
    .updateTable('x402_authorizations')
    .set({ settlement_id: settlement.id, from_block: settlement.fromBlock })
    .where('asset', '=', getAddress(key.asset))
    .where('payer', '=', getAddress(key.payer))
    .where('nonce', '=', key.nonce.toLowerCase() as Hex)
    .where('settlement_id', 'is', null)
    .execute();
}

/** An authorization recorded for a request that was refused before it was served, and never sent: a retry may use it. */
export async function forgetUnusedAuthorization(
  store: Store,
  key: { asset: Address; payer: Address; nonce: Hex },
): Promise<void> {
  await store.db
    .deleteFrom('x402_authorizations')
    .where('asset', '=', getAddress(key.asset))
    .where('payer', '=', getAddress(key.payer))
    .where('nonce', '=', key.nonce.toLowerCase() as Hex)
    .where('settlement_id', 'is', null)
    .execute();
}

/** Notes the transaction that used the authorization. */
export async function markAuthorizationUsed(store: Store, settlementId: string, txHash: Hash): Promise<void> {
  await store.db
    .updateTable('x402_authorizations')
    .set({ tx_hash: txHash })
    .where('settlement_id', '=', settlementId)
    .execute();
}

function toSeenAuthorization(row: Selectable<X402AuthorizationsTable>): SeenAuthorization {
  return {
    asset: row.asset,
    payer: row.payer,
    nonce: row.nonce,
    valueAtomic: row.value_atomic,
    validBefore: row.valid_before,
    settlementId: row.settlement_id,
    txHash: row.tx_hash,
    fromBlock: row.from_block,
  };
}
