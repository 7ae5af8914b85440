import type { Address } from 'viem';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { describe, expect, test } from 'vitest';
import { recordUsage } from '../../src/billing/ledger.js';
import { confirmSettlement, openSettlement, sessionPaid } from '../../src/billing/settlements.js';
import type { PaymentRail } from '../../src/services/chat-contracts.js';
import type { Store } from '../../src/store/database.js';
import { insertSession } from '../../src/store/sessions.js';
import { testDialects, withTestStore } from '../support/db.js';
import { completedRequest } from '../support/usage-entries.js';

/**
 * What admission reads of what a session's delegation paid, once the payer's debt is settled: the
 * payer's confirmed session-rail settlements opened since the session was stored, and those
 * confirmed in the current period of its per-period cap.
 */
describe.each(testDialects)('what the session rail paid, on %s', (dialect) => {
  let store: Store;
  withTestStore(dialect, (opened) => {
    store = opened;
  });

  async function sessionOf(wallet: Address, id: string): Promise<void> {
    await insertSession(store, {
      id,
      wallet,
      delegation: '{}',
      delegationHash: `0x${id.padStart(64, '0')}`,
      signature: '0x',
      limits: '{}',
      expiresAt: new Date(Date.now() + 3_600_000),
    });
  }

  /** A settlement of `atomic` USDC units; confirmed unless said. */
  async function settle(payer: Address, atomic: bigint, rail: PaymentRail = 'session', confirm = true) {
    await recordUsage(store, completedRequest(payer, atomic * 1_000_000n, { rail }));
    const opened = await openSettlement(store, payer, rail);
    if (!opened) throw new Error('nothing owed');
    if (confirm) await confirmSettlement(store, opened.id, { txHash: `0x${'cd'.repeat(32)}` });
    return opened;
  }

  test('sums confirmed session-rail settlements since the session, and those of the period', async () => {
    const payer = privateKeyToAddress(generatePrivateKey());
    await sessionOf(payer, 'paid-1');
    const query = { wallet: payer, paidSince: new Date(0) };
    expect(await sessionPaid(store, query)).toEqual({ paidAtomic: 0n, paidInPeriodAtomic: 0n });

    await settle(payer, 66n);
    const periodFrom = new Date();
    await new Promise((resolve) => setTimeout(resolve, 5));
    await settle(payer, 4_000_000_000_000n);
    // Paid by proofs, not by a delegation.
    await settle(payer, 7n, 'x402');
    expect(await sessionPaid(store, { ...query, periodFrom })).toEqual({
      paidAtomic: 4_000_000_000_066n,
      paidInPeriodAtomic: 4_000_000_000_000n,
    });
    // Settlements opened before the session was stored paid other delegations.
    expect(await sessionPaid(store, { ...query, paidSince: periodFrom })).toMatchObject({
      paidAtomic: 4_000_000_000_000n,
    });
  });

  test('a settlement in flight is not paid', async () => {
    const payer = privateKeyToAddress(generatePrivateKey());
    await sessionOf(payer, 'paid-2');
    await settle(payer, 66n, 'session', false);
    expect(await sessionPaid(store, { wallet: payer, paidSince: new Date(0) })).toEqual({
      paidAtomic: 0n,
      paidInPeriodAtomic: 0n,
    });
  });
});
