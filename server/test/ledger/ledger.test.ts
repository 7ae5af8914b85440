import fc from 'fast-check';
import type { Address } from 'viem';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { describe, expect, test, vi } from 'vitest';
import { debtOf, findUsageRecord, recordUsage, UsageConflictError } from '../../src/billing/ledger.js';
import {
  collectableDebtors,
  confirmSettlement,
  failSettlement,
  findSettlement,
  listUnfinishedSettlements,
  markSettlementSent,
  openSettlement,
  replaceSettlementTransaction,
  SettlementInProgressError,
  SettlementStateError,
  settlementsOf,
} from '../../src/billing/settlements.js';
import { createUsageRecorder } from '../../src/billing/usage-recorder.js';
import type { Store } from '../../src/store/database.js';
import { revokeSession } from '../../src/store/sessions.js';
import { testCatalog } from '../support/catalog.js';
import { testDialects, withTestStore } from '../support/db.js';
import { storePlaceholderSession } from '../support/sessions.js';

const newPayer = () => privateKeyToAddress(generatePrivateKey());
let sequence = 0;
const usage = {
  inputTokens: 0,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  outputTokens: 0,
  reasoningTokens: 0,
  exact: true,
};
const cost = (totalPicoUsd: bigint) => ({
  providerPicoUsd: totalPicoUsd,
  commissionPicoUsd: 0n,
  totalPicoUsd,
});
const txHash = (n: number) => `0x${n.toString(16).padStart(64, '0')}` as const;

async function record(store: Store, payer: `0x${string}`, totalPicoUsd: bigint, createdAt?: Date) {
  return recordUsage(store, {
    requestId: `req-${++sequence}`,
    payer,
    rail: 'session',
    model: 'anthropic/claude-sonnet-4.5',
    usage,
    cost: cost(totalPicoUsd),
    createdAt,
  });
}

const HOUR = 3_600_000;
/** When the collector settles: debts idle an hour, and those of sessions all ending within the hour. */
const dueAfterAnHour = { idleMs: HOUR, sessionsEndingWithinMs: HOUR };

describe.each(testDialects)('ledger on %s', (dialect) => {
  let store: Store;
  withTestStore(dialect, (opened) => {
    store = opened;
  });

  test('a usage record is stored exactly, with checksummed payer, and idempotent on its request id', async () => {
    const payer = newPayer();
    const entry = {
      requestId: `idem-${dialect}`,
      payer: payer.toLowerCase() as `0x${string}`,
      rail: 'x402' as const,
      model: 'google/gemini-2.5-flash',
      usage: {
        inputTokens: 7,
        cacheReadTokens: 3,
        cacheWriteTokens: 1,
        outputTokens: 11,
        reasoningTokens: 5,
        exact: false,
      },
      cost: {
        providerPicoUsd: 9_223_372_036_854_775n,
        commissionPicoUsd: 1n,
        totalPicoUsd: 9_223_372_036_854_776n,
      },
    };
    const first = await recordUsage(store, entry);
    expect(first).toMatchObject({
      payer,
      rail: 'x402',
      settlementId: null,
      cost: entry.cost,
      usage: entry.usage,
    });
    expect(await recordUsage(store, entry)).toEqual(first);
    expect(await findUsageRecord(store, entry.requestId)).toEqual(first);
    await expect(
      recordUsage(store, { ...entry, usage: { ...entry.usage, outputTokens: 12 } }),
    ).rejects.toBeInstanceOf(UsageConflictError);
    await expect(recordUsage(store, { ...entry, payer: newPayer() })).rejects.toBeInstanceOf(
      UsageConflictError,
    );
    expect((await debtOf(store, payer)).unpaidPicoUsd).toBe(entry.cost.totalPicoUsd);
  });

  test('the recorder prices a request at catalog prices plus commission and states it exactly', async () => {
    const catalog = testCatalog();
    const model = catalog.find('anthropic/claude-sonnet-4.5')!;
    const payer = newPayer();
    const recorder = createUsageRecorder(store, 1000);
    const stated = await recorder.record({
      requestId: `recorder-${dialect}`,
      payer,
      rail: 'session',
      model,
      usage: {
        inputTokens: 1001,
        cacheReadTokens: 333,
        cacheWriteTokens: 7,
        outputTokens: 99,
        reasoningTokens: 13,
        exact: true,
      },
    });
    expect(stated).toEqual({
      provider: '0.00480915',
      commission: '0.000480915',
      total: '0.005290065',
      totalPicoUsd: '5290065000',
      providerPicoUsd: '4809150000',
      commissionPicoUsd: '480915000',
    });
    const stored = await findUsageRecord(store, `recorder-${dialect}`);
    expect(stored?.cost).toEqual({
      providerPicoUsd: 4_809_150_000n,
      commissionPicoUsd: 480_915_000n,
      totalPicoUsd: 5_290_065_000n,
    });
  });

  test('a payer with nothing recorded owes nothing and opens no settlement', async () => {
    const payer = newPayer();
    expect(await debtOf(store, payer)).toEqual({
      unpaidPicoUsd: 0n,
      creditPicoUsd: 0n,
      owedPicoUsd: 0n,
      owedAtomic: 0n,
    });
    expect(await openSettlement(store, payer, 'session')).toBeNull();
  });

  test('a settlement rounds up to the atomic unit and the excess is credited once confirmed', async () => {
    const payer = newPayer();
    await record(store, payer, 4_125_000n);
    await record(store, payer, 75_000n);
    expect(await debtOf(store, payer)).toEqual({
      unpaidPicoUsd: 4_200_000n,
      creditPicoUsd: 0n,
      owedPicoUsd: 4_200_000n,
      owedAtomic: 5n,
    });
    const opened = await openSettlement(store, payer, 'session');
    expect(opened).toMatchObject({
      payer,
      rail: 'session',
      status: 'pending',
      amountAtomic: 5n,
      recordsTotalPicoUsd: 4_200_000n,
      recordCount: 2,
      creditBeforePicoUsd: 0n,
      carriedPicoUsd: 800_000n,
      txHash: null,
    });
    // Claimed records are still owed until the transfer is confirmed.
    expect((await debtOf(store, payer)).owedAtomic).toBe(5n);
    await expect(openSettlement(store, payer, 'session')).rejects.toBeInstanceOf(SettlementInProgressError);

    const sent = await markSettlementSent(store, opened!.id, txHash(1));
    expect(sent).toMatchObject({ status: 'sent', txHash: txHash(1) });
    expect(sent.sentAt).toBeInstanceOf(Date);
    const confirmed = await confirmSettlement(store, opened!.id, { txHash: txHash(1), blockNumber: 42n });
    expect(confirmed).toMatchObject({ status: 'confirmed', txHash: txHash(1), blockNumber: 42n });
    expect(await debtOf(store, payer)).toEqual({
      unpaidPicoUsd: 0n,
      creditPicoUsd: 800_000n,
      owedPicoUsd: 0n,
      owedAtomic: 0n,
    });
    // Confirming twice with the same receipt is a no-op, a failure after confirmation is refused.
    expect(await confirmSettlement(store, opened!.id, { txHash: txHash(1) })).toEqual(confirmed);
    await expect(failSettlement(store, opened!.id, 'late')).rejects.toBeInstanceOf(SettlementStateError);

    // The credit pays the next records first.
    await record(store, payer, 1_500_000n);
    const next = await openSettlement(store, payer, 'x402');
    expect(next).toMatchObject({ amountAtomic: 1n, creditBeforePicoUsd: 800_000n, carriedPicoUsd: 300_000n });
    await confirmSettlement(store, next!.id, { txHash: txHash(2) });
    expect((await debtOf(store, payer)).creditPicoUsd).toBe(300_000n);
  });

  test('records the credit covers are paid by it without a transfer', async () => {
    const payer = newPayer();
    await record(store, payer, 1_000_001n);
    const first = await openSettlement(store, payer, 'session');
    expect(first?.amountAtomic).toBe(2n);
    await confirmSettlement(store, first!.id, { txHash: txHash(3) });
    await record(store, payer, 500_000n);
    await record(store, payer, 499_999n);
    expect(await debtOf(store, payer)).toMatchObject({
      unpaidPicoUsd: 999_999n,
      creditPicoUsd: 999_999n,
      owedAtomic: 0n,
    });
    expect(await openSettlement(store, payer, 'session')).toBeNull();
    expect(await debtOf(store, payer)).toEqual({
      unpaidPicoUsd: 0n,
      creditPicoUsd: 0n,
      owedPicoUsd: 0n,
      owedAtomic: 0n,
    });
    const [byCredit] = await settlementsOf(store, payer);
    expect(byCredit).toMatchObject({ status: 'confirmed', amountAtomic: 0n, recordCount: 2, txHash: null });
  });

  test("a payer's settlements opened within one millisecond are listed newest first", async () => {
    const payer = newPayer();
    const clock = vi.spyOn(Date, 'now').mockReturnValue(1_800_000_000_000);
    try {
      const opened = [];
      for (let n = 0; n < 5; n++) {
        await record(store, payer, 1_000_000n);
        const settlement = await openSettlement(store, payer, 'session');
        await confirmSettlement(store, settlement!.id, { txHash: txHash(100 + n) });
        opened.push(settlement!.id);
      }
      const listed = await settlementsOf(store, payer);
      expect(listed.map((s) => s.id)).toEqual(opened.reverse());
    } finally {
      clock.mockRestore();
    }
  });

  test('a failed settlement releases its records and leaves the credit as it was', async () => {
    const payer = newPayer();
    await record(store, payer, 2_500_000n);
    const paid = await openSettlement(store, payer, 'session');
    await confirmSettlement(store, paid!.id, { txHash: txHash(4) });
    await record(store, payer, 10_000_000n);
    await record(store, payer, 1n);
    const before = await debtOf(store, payer);
    expect(before).toMatchObject({ creditPicoUsd: 500_000n, unpaidPicoUsd: 10_000_001n, owedAtomic: 10n });

    const opened = await openSettlement(store, payer, 'session');
    await markSettlementSent(store, opened!.id, txHash(5));
    const failed = await failSettlement(store, opened!.id, 'ERC20TransferAmountEnforcer:allowance-exceeded');
    expect(failed).toMatchObject({
      status: 'failed',
      failureReason: 'ERC20TransferAmountEnforcer:allowance-exceeded',
    });
    expect(await debtOf(store, payer)).toEqual(before);
    expect(await failSettlement(store, opened!.id, 'again')).toMatchObject({
      failureReason: failed.failureReason,
    });
    await expect(confirmSettlement(store, opened!.id, { txHash: txHash(5) })).rejects.toBeInstanceOf(
      SettlementStateError,
    );

    const retry = await openSettlement(store, payer, 'session');
    expect(retry).toMatchObject({ amountAtomic: 10n, recordCount: 2, creditBeforePicoUsd: 500_000n });
    await confirmSettlement(store, retry!.id, { txHash: txHash(6) });
    expect((await debtOf(store, payer)).creditPicoUsd).toBe(499_999n);
  });

  test('a failure decided on a stale look leaves a settlement sent or replaced since as it is, its records claimed', async () => {
    const payer = newPayer();
    await record(store, payer, 3_000_000n);
    const opened = await openSettlement(store, payer, 'session');
    // Another holder of the payer (whose lock this one lost) sends it meanwhile.
    const sent = await markSettlementSent(store, opened!.id, txHash(21));
    await expect(failSettlement(store, opened!.id, 'never sent', opened!)).rejects.toBeInstanceOf(
      SettlementStateError,
    );
    const replaced = await replaceSettlementTransaction(store, opened!.id, txHash(21), {
      hash: txHash(22),
      raw: '0x02000022',
    });
    await expect(failSettlement(store, opened!.id, 'dropped', sent)).rejects.toBeInstanceOf(
      SettlementStateError,
    );
    expect(await findSettlement(store, opened!.id)).toMatchObject({ status: 'sent', txHash: txHash(22) });
    // Still in flight, its records claimed: no second settlement can pay them.
    await expect(openSettlement(store, payer, 'session')).rejects.toBeInstanceOf(SettlementInProgressError);
    // A look at the settlement as it stands decides.
    expect(await failSettlement(store, opened!.id, 'dropped', replaced)).toMatchObject({ status: 'failed' });
    expect(await openSettlement(store, payer, 'session')).toMatchObject({ amountAtomic: 3n, recordCount: 1 });
  });

  test('a sent settlement replaced twice keeps every replaced hash; it is confirmed by whichever was mined', async () => {
    const payer = newPayer();
    await record(store, payer, 3_000_000n);
    const opened = await openSettlement(store, payer, 'session');
    await markSettlementSent(store, opened!.id, txHash(11));
    const raw = (n: number) => `0x02${n.toString(16).padStart(8, '0')}` as const;
    const once = await replaceSettlementTransaction(store, opened!.id, txHash(11), {
      hash: txHash(12),
      raw: raw(12),
    });
    expect(once).toMatchObject({ status: 'sent', txHash: txHash(12), replacedTxHashes: [txHash(11)] });
    // Only the transaction the settlement waits on now can be replaced: a stale look changes nothing.
    await expect(
      replaceSettlementTransaction(store, opened!.id, txHash(11), { hash: txHash(13), raw: raw(13) }),
    ).rejects.toBeInstanceOf(SettlementStateError);
    const twice = await replaceSettlementTransaction(store, opened!.id, txHash(12), {
      hash: txHash(14),
      raw: raw(14),
    });
    expect(twice).toMatchObject({ txHash: txHash(14), replacedTxHashes: [txHash(11), txHash(12)] });
    // The first one was mined after all: the settlement names it.
    const confirmed = await confirmSettlement(store, opened!.id, { txHash: txHash(11), blockNumber: 7n });
    expect(confirmed).toMatchObject({ status: 'confirmed', txHash: txHash(11) });
    expect((await debtOf(store, payer)).owedAtomic).toBe(0n);
    await expect(
      replaceSettlementTransaction(store, opened!.id, txHash(11), { hash: txHash(15), raw: raw(15) }),
    ).rejects.toBeInstanceOf(SettlementStateError);
  });

  test('unknown settlements are refused', async () => {
    await expect(markSettlementSent(store, 'nope', txHash(7))).rejects.toBeInstanceOf(SettlementStateError);
    await expect(confirmSettlement(store, 'nope', { txHash: txHash(7) })).rejects.toThrow(/does not exist/);
    expect(await findSettlement(store, 'nope')).toBeUndefined();
  });

  test('unfinished settlements and idle debtors are listed for reconciliation and the collector', async () => {
    const now = new Date('2030-01-01T12:00:00Z');
    const idle = newPayer();
    const recent = newPayer();
    const settling = newPayer();
    await record(store, idle, 10n, new Date(now.getTime() - 3 * HOUR));
    await record(store, idle, 10n, new Date(now.getTime() - 2 * HOUR));
    await record(store, recent, 10n, new Date(now.getTime() - 3 * HOUR));
    await record(store, recent, 10n, new Date(now.getTime() - 1000));
    await record(store, settling, 10n, new Date(now.getTime() - 3 * HOUR));
    const pending = await openSettlement(store, settling, 'session');
    await record(store, settling, 10n, new Date(now.getTime() - 3 * HOUR));

    const debtors = await collectableDebtors(store, dueAfterAnHour, { now });
    expect(debtors).toContain(idle);
    expect(await collectableDebtors(store, dueAfterAnHour, { now, rail: 'session' })).toContain(idle);
    expect(await collectableDebtors(store, dueAfterAnHour, { now, rail: 'x402' })).not.toContain(idle);
    expect(debtors).not.toContain(recent);
    expect(debtors).not.toContain(settling);
    const unfinishedIds = async (filter?: Parameters<typeof listUnfinishedSettlements>[1]) =>
      (await listUnfinishedSettlements(store, filter)).map((s) => s.id);
    expect(await unfinishedIds()).toContain(pending!.id);
    expect(await unfinishedIds({ rail: 'session' })).toContain(pending!.id);
    expect(await unfinishedIds({ rail: 'x402' })).not.toContain(pending!.id);
    // Last touched when it was opened (the wall clock): untouched for a minute it is not yet.
    expect(await unfinishedIds({ olderThan: new Date(Date.now() - 60_000) })).not.toContain(pending!.id);
    expect(await unfinishedIds({ olderThan: new Date(Date.now() + 60_000) })).toContain(pending!.id);
    await failSettlement(store, pending!.id, 'test');
    expect((await listUnfinishedSettlements(store)).map((s) => s.id)).not.toContain(pending!.id);
    expect(await collectableDebtors(store, dueAfterAnHour, { now })).toContain(settling);
  });

  test('idle debtors can be walked page by page after the last one seen, each payer once', async () => {
    // Before every other test's records, so that only this test's payers are idle then.
    const now = new Date('2001-01-01T12:00:00Z');
    const idle = [newPayer(), newPayer(), newPayer(), newPayer(), newPayer()];
    for (const payer of idle) await record(store, payer, 10n, new Date(now.getTime() - 2 * HOUR));
    await record(store, newPayer(), 10n, new Date(now.getTime() - 1000));

    const walked: Address[] = [];
    for (let pages = 0; pages < idle.length; pages++) {
      const page = await collectableDebtors(store, dueAfterAnHour, { now, limit: 2, after: walked.at(-1) });
      walked.push(...page);
      if (page.length < 2) break;
    }

    expect([...walked].sort()).toEqual([...idle].sort());
  });

  test('over any history of settlements: confirmed amounts x 1e6 - credit = cost of paid records', async () => {
    const step = fc.oneof(
      {
        weight: 5,
        arbitrary: fc.bigInt({ min: 0n, max: 30_000_000n }).map((pico) => ({ kind: 'use' as const, pico })),
      },
      { weight: 2, arbitrary: fc.constant({ kind: 'settle' as const, outcome: 'confirm' as const }) },
      { weight: 1, arbitrary: fc.constant({ kind: 'settle' as const, outcome: 'fail' as const }) },
    );
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 25 }), async (steps) => {
        const payer = newPayer();
        let recorded = 0n;
        let confirmedAtomic = 0n;
        for (const s of steps) {
          if (s.kind === 'use') {
            await record(store, payer, s.pico);
            recorded += s.pico;
            continue;
          }
          const settlement = await openSettlement(store, payer, 'session');
          if (!settlement) continue;
          if (s.outcome === 'fail') {
            await failSettlement(store, settlement.id, 'reverted');
          } else {
            await confirmSettlement(store, settlement.id, { txHash: txHash(++sequence) });
            confirmedAtomic += settlement.amountAtomic;
            // Nothing stays owed after a confirmed settlement.
            expect((await debtOf(store, payer)).owedPicoUsd).toBe(0n);
          }
        }
        const debt = await debtOf(store, payer);
        const paidRecords = recorded - debt.unpaidPicoUsd;
        expect(confirmedAtomic * 1_000_000n - debt.creditPicoUsd).toBe(paidRecords);
        expect(debt.creditPicoUsd).toBeGreaterThanOrEqual(0n);
        expect(debt.creditPicoUsd).toBeLessThan(1_000_000n);
        const history = await settlementsOf(store, payer, { limit: 100 });
        const paidBySettlements = history
          .filter((s) => s.status === 'confirmed')
          .reduce((sum, s) => sum + s.recordsTotalPicoUsd, 0n);
        expect(paidBySettlements).toBe(paidRecords);
      }),
      { numRuns: dialect === 'sqlite' ? 60 : 25 },
    );
  });
});

describe.each(testDialects)('debts the collector settles before they are idle, on %s', (dialect) => {
  let store: Store;
  withTestStore(dialect, (opened) => {
    store = opened;
  });
  const now = new Date('2030-01-01T12:00:00Z');
  const at = (offsetMs: number) => new Date(now.getTime() + offsetMs);

  /** A payer owing a record a minute old, with sessions expiring at these offsets from `now`. */
  async function owingWithSessions(...sessions: Array<{ expiresIn: number; revoked?: boolean }>) {
    const payer = newPayer();
    for (const session of sessions) {
      const id = `session-${++sequence}`;
      await storePlaceholderSession(store, {
        id,
        wallet: payer,
        expiresAt: at(session.expiresIn),
        createdAt: at(-HOUR),
      });
      if (session.revoked) await revokeSession(store, id, at(-1000));
    }
    await record(store, payer, 10n, at(-60_000));
    return payer;
  }

  test('a payer whose sessions all end within the idle time plus the margin is due at once', async () => {
    const ending = await owingWithSessions({ expiresIn: 10 * 60_000 });
    const endingTwice = await owingWithSessions({ expiresIn: 10 * 60_000 }, { expiresIn: 50 * 60_000 });
    const lasting = await owingWithSessions({ expiresIn: 2 * HOUR });
    const endingBesideLasting = await owingWithSessions({ expiresIn: 10 * 60_000 }, { expiresIn: 2 * HOUR });
    const expired = await owingWithSessions({ expiresIn: -1000 });

    const due = await collectableDebtors(store, dueAfterAnHour, { now, rail: 'session' });
    expect(due).toEqual(expect.arrayContaining([ending, endingTwice]));
    // Its next request or the idle wait pays it in time; with no session left, nothing can.
    for (const payer of [lasting, endingBesideLasting, expired]) expect(due).not.toContain(payer);
  });

  test('a payer whose sessions were all revoked is due at once: their delegations still pay on chain', async () => {
    const revoked = await owingWithSessions({ expiresIn: 2 * HOUR, revoked: true });
    const revokedBesideLasting = await owingWithSessions(
      { expiresIn: 2 * HOUR, revoked: true },
      { expiresIn: 2 * HOUR },
    );

    const due = await collectableDebtors(store, dueAfterAnHour, { now });
    expect(due).toContain(revoked);
    expect(due).not.toContain(revokedBesideLasting);
  });
});
