import { costsSomething, isUnfinished } from '../billing/settlements.js';
import type { Store } from '../store/database.js';
import { exactSum, readSum } from '../store/exact-sum.js';
import type { LedgerSnapshot } from './metrics.js';

/**
 * What every payer owes and how many settlements are in flight, from the partial indexes on owed
 * records and unfinished settlements: the cost follows the open debt, not the history (nor free requests).
 */
export async function readLedgerSnapshot(store: Store): Promise<LedgerSnapshot> {
  const unpaid = store.db
    .selectFrom('usage_records')
    .select('total_pico as amount')
    .where('settlement_id', 'is', null)
    .where(costsSomething('total_pico'))
    .unionAll(
      store.db.selectFrom('settlements').select('records_total_pico as amount').where(isUnfinished('status')),
    );
  // Payers with no confirmed payment: the exposure the unproven bounds are for.
  const unprovenOwed = store.db
    .selectFrom('usage_records as u')
    .select(exactSum('u.total_pico', 'owed'))
    .where('u.settlement_id', 'is', null)
    .where(costsSomething('u.total_pico'))
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('settlements as s')
            .select('s.id')
            .whereRef('s.payer', '=', 'u.payer')
            .where('s.status', '=', 'confirmed')
            .where('s.amount_atomic', '>', 0n),
        ),
      ),
    );
  const [owed, unproven, unfinished] = await Promise.all([
    store.db
      .selectFrom(unpaid.as('unpaid'))
      .select(exactSum('unpaid.amount', 'owed'))
      .executeTakeFirstOrThrow(),
    unprovenOwed.executeTakeFirstOrThrow(),
    store.db
      .selectFrom('settlements')
      .select((eb) => eb.fn.countAll().as('count'))
      .where(isUnfinished('status'))
      .executeTakeFirstOrThrow(),
  ]);
  return {
    outstandingPicoUsd: readSum(owed, 'owed'),
    unprovenOutstandingPicoUsd: readSum(unproven, 'owed'),
    unfinishedSettlements: Number(unfinished.count),
  };
}
