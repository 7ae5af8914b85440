import type { Address } from 'viem';
import type { LocalChain } from '../../devkit/chain/index.js';
import { type LedgerReconciliation, reconcileLedger } from '../../src/payments/outbox/reconcile-ledger.js';
import type { Store } from '../../src/store/database.js';

/** USDC atomic units the payer paid, by its confirmed settlements. */
export async function confirmedAmount(store: Store, payer: Address): Promise<bigint> {
  const rows = await store.db
    .selectFrom('settlements')
    .select('amount_atomic')
    .where('payer', '=', payer)
    .where('status', '=', 'confirmed')
    .execute();
  return rows.reduce((sum, row) => sum + row.amount_atomic, 0n);
}

/**
 * `npm run reconcile`'s check of the ledger against the local chain's USDC transfers to the treasury,
 * the gateway's key known (as the command knows it from SESSION_KEY_PRIVATE_KEY).
 */
export function reconcileWithChain(store: Store, local: LocalChain): Promise<LedgerReconciliation> {
  return reconcileLedger(store, {
    publicClient: local.publicClient,
    usdc: local.usdc,
    treasury: local.accounts.treasury.address,
    relayer: local.accounts.gateway.address,
  });
}
