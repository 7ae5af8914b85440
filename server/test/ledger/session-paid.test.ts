import type { Address } from 'viem';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { afterEach, describe, expect, test, vi } from 'vitest';
import { recordUsage } from '../../src/billing/ledger.js';
import { confirmSettlement, openSettlement, sessionStanding } from '../../src/billing/settlements.js';
import type { PaymentRail } from '../../src/services/chat-contracts.js';
import type { Store } from '../../src/store/database.js';
import { testDialects, withTestStore } from '../support/db.js';
import { storePlaceholderSession } from '../support/sessions.js';
import { completedRequest } from '../support/usage-entries.js';

/**
 * What admission reads of what a session's delegation paid: running totals on the session's row,
 * grown in the transaction that confirms each of its settlements (total, and per period of its
 * per-period cap).
 */
describe.each(testDialects)('what a session paid, on %s', (dialect) => {
  let store: Store;
  withTestStore(dialect, (opened) => {
    store = opened;
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  const TX = `0x${'cd'.repeat(32)}` as const;
  /** A 60-second period cap whose first period began at T0. */
  const T0 = Date.parse('2030-01-01T00:00:00.000Z');

  const sessionOf = (wallet: Address, id: string, limits: object = {}) =>
    storePlaceholderSession(store, { id, wallet, limits, createdAt: new Date(T0 - 1_000) });

  /** A settlement of `atomic` USDC units through `sessionId` (none: not through a session). */
  async function open(payer: Address, atomic: bigint, sessionId?: string, rail: PaymentRail = 'session') {
    await recordUsage(store, completedRequest(payer, atomic * 1_000_000n, { rail }));
    const opened = await openSettlement(store, payer, rail, undefined, sessionId);
    if (!opened) throw new Error('nothing owed');
    return opened;
  }

  async function settle(payer: Address, atomic: bigint, sessionId?: string, rail: PaymentRail = 'session') {
    const opened = await open(payer, atomic, sessionId, rail);
    await confirmSettlement(store, opened.id, { txHash: TX });
    return opened;
  }

  const paidOf = async (wallet: Address, sessionId: string) =>
    (await sessionStanding(store, { sessionId, wallet })).paid;

  test("sums each session's confirmed settlements, and nothing in flight or paid by proofs", async () => {
    const payer = privateKeyToAddress(generatePrivateKey());
    await sessionOf(payer, 'paid-1');
    await sessionOf(payer, 'paid-1b');
    expect(await paidOf(payer, 'paid-1')).toEqual({ paidAtomic: 0n, periodPaidAtomic: 0n, paidPeriod: null });

    await settle(payer, 66n, 'paid-1');
    await settle(payer, 4_000_000_000_000n, 'paid-1');
    // Another session of the payer: its delegation paid it, not paid-1's.
    await settle(payer, 5n, 'paid-1b');
    // Paid by proofs, not by a delegation.
    await settle(payer, 7n, undefined, 'x402');
    // Not confirmed yet.
    await open(payer, 9n, 'paid-1');
    expect(await paidOf(payer, 'paid-1')).toEqual({
      paidAtomic: 4_000_000_000_066n,
      periodPaidAtomic: 0n,
      paidPeriod: null,
    });
    expect((await paidOf(payer, 'paid-1b')).paidAtomic).toBe(5n);
    // Read with the standing: the settlement in flight is what the payer may owe.
    expect(await sessionStanding(store, { sessionId: 'paid-1', wallet: payer })).toMatchObject({
      active: true,
      mayOwe: true,
    });
  });

  test('a settlement confirmed twice is counted once', async () => {
    const payer = privateKeyToAddress(generatePrivateKey());
    await sessionOf(payer, 'paid-2');
    const opened = await settle(payer, 66n, 'paid-2');
    // The outbox's reconciliation finding the same receipt again.
    expect((await confirmSettlement(store, opened.id, { txHash: TX })).status).toBe('confirmed');
    expect((await paidOf(payer, 'paid-2')).paidAtomic).toBe(66n);
  });

  test("counts what each period of a per-period cap paid, from the period's start", async () => {
    const payer = privateKeyToAddress(generatePrivateKey());
    const period = { amountAtomic: '10000', periodSeconds: 60, startsAt: new Date(T0).toISOString() };
    await sessionOf(payer, 'paid-3', { totalCapAtomic: '100000', period });
    // Only Date is faked: the store's own timers run.
    vi.useFakeTimers({ toFake: ['Date'] });
    const at = async (ms: number, atomic: bigint) => {
      vi.setSystemTime(T0 + ms);
      await settle(payer, atomic, 'paid-3');
    };

    await at(10_000, 66n);
    await at(59_999, 100n);
    expect(await paidOf(payer, 'paid-3')).toEqual({
      paidAtomic: 166n,
      periodPaidAtomic: 166n,
      paidPeriod: 0n,
    });
    // The next period counts from its first settlement.
    await at(60_000, 5n);
    expect(await paidOf(payer, 'paid-3')).toEqual({ paidAtomic: 171n, periodPaidAtomic: 5n, paidPeriod: 1n });
    // Several periods later.
    await at(60_000 * 7 + 1, 30n);
    await at(60_000 * 7 + 2, 3n);
    expect(await paidOf(payer, 'paid-3')).toEqual({
      paidAtomic: 204n,
      periodPaidAtomic: 33n,
      paidPeriod: 7n,
    });

    // A confirmation stamped in a period already over (racing another instance's) counts in the
    // total only.
    const late = await open(payer, 11n, 'paid-3');
    vi.setSystemTime(T0 + 60_000 * 6);
    await confirmSettlement(store, late.id, { txHash: TX });
    expect(await paidOf(payer, 'paid-3')).toEqual({
      paidAtomic: 215n,
      periodPaidAtomic: 33n,
      paidPeriod: 7n,
    });
  });
});
