import type { Address } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { settlementsOf } from '../../src/billing/settlements.js';
import { createTestDatabase, type TestDatabase, testDialects } from '../support/db.js';
import { runReconcileCommand } from '../support/reconcile-command.js';
import { useFaultStack } from './harness.js';

// `npm run reconcile` with a gateway's own environment, on the PostgreSQL ledger that gateway (a
// process on a local chain) kept of session-rail settlements, then on that ledger broken by hand.
// The x402 ledgers on SQLite are reconcile-command.test.ts's.
describe.runIf(testDialects.includes('postgres'))(
  'npm run reconcile on a PostgreSQL ledger (DATABASE_URL)',
  () => {
    let database: TestDatabase;
    // Registered before the stack's hooks: created before it, dropped after it.
    beforeAll(async () => {
      database = await createTestDatabase('postgres');
    });
    afterAll(() => database?.drop());
    const stack = useFaultStack({ databaseUrl: () => database.url });

    /** A session payer whose first request was paid through its session by its second. */
    async function payerWithOneSettlement(owner: number): Promise<Address> {
      const payer = await stack.owingPayer(owner);
      await stack.servedPayingDebt(payer);
      return payer.address;
    }

    const confirmedSettlementOf = async (payer: Address) => {
      const [settlement] = await settlementsOf(stack.store, payer, { status: 'confirmed' });
      return settlement!;
    };

    test('matching the chain: exit 0; an amount altered and a settlement deleted: exit 1 naming each', async () => {
      const altered = await payerWithOneSettlement(0);
      const lost = await payerWithOneSettlement(1);

      const clean = await runReconcileCommand(stack.env);
      expect(clean.stdout).toMatch(
        /^The ledger matches the chain: 2 payers, 2 settlements \(2 confirmed transfers checked\), 2 transfers to the treasury in blocks 0-\d+\.\n\nCommission against gas, .+:\n- session rail: 4 requests, commission [0-9.]+ USD; 2 settlements, \d+ gas, [0-9.]+ ETH\n$/,
      );
      expect(clean.code).toBe(0);

      const { db } = stack.store;
      // The recorded amount is not what moved.
      const paid = await confirmedSettlementOf(altered);
      await db
        .updateTable('settlements')
        .set((eb) => ({ amount_atomic: eb('amount_atomic', '+', 1n) }))
        .where('id', '=', paid.id)
        .execute();
      // A settlement row lost, its records owed again: the payment its transaction made is unrecorded.
      const gone = await confirmedSettlementOf(lost);
      await db.transaction().execute(async (trx) => {
        await trx
          .updateTable('usage_records')
          .set({ settlement_id: null })
          .where('settlement_id', '=', gone.id)
          .execute();
        await trx.deleteFrom('settlements').where('id', '=', gone.id).execute();
      });

      const broken = await runReconcileCommand(stack.env);
      const [check] = broken.stdout.split('\n\nCommission against gas');
      const [summary, ...mismatches] = check!.trim().split('\n');
      expect(summary).toMatch(
        /^The ledger does not match the chain \(3 mismatches\): 2 payers, 1 settlement \(/,
      );
      expect(mismatches.sort()).toEqual(
        [
          `- [amount_differs] confirmed settlement ${paid.id} records 0.000067 USDC but its transaction ${paid.txHash} moved 0.000066 USDC`,
          `- [payer_unbalanced] payer ${altered}: confirmed settlements paid 0.000067 USD and 0 USD is credited back, but its paid records cost 0.000066 USD (off by 0.000001 USD)`,
          `- [transfer_unrecorded] transaction ${gone.txHash} moved 0.000066 USDC from ${lost} to the treasury in a transaction the gateway's key ${stack.local.accounts.gateway.address} sent, and no settlement records it`,
        ].sort(),
      );
      expect(broken.code).toBe(1);
    });
  },
);
