import type { Address } from 'viem';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { describe, expect, onTestFinished, test, vi } from 'vitest';
import { debtOf, recordUsage } from '../../src/billing/ledger.js';
import { confirmSettlement, openSettlement } from '../../src/billing/settlements.js';
import { GatewayError } from '../../src/errors.js';
import {
  createPaymentGate,
  type IdentifiedPayer,
  type PaymentMethod,
} from '../../src/payments/admission/gate.js';
import { localInFlightLimiter } from '../../src/payments/admission/in-flight.js';
import { localHourlyCounter, unprovenPolicy } from '../../src/payments/admission/unproven.js';
import { sessionPaymentMethod } from '../../src/payments/session/session-method.js';
import type { Admission, AdmissionRequest } from '../../src/services/chat-contracts.js';
import type { Store } from '../../src/store/database.js';
import { revokeSession } from '../../src/store/sessions.js';
import { testCatalog } from '../support/catalog.js';
import { testDialects, withTestStore } from '../support/db.js';
import { storePlaceholderSession } from '../support/sessions.js';
import { completedRequest } from '../support/usage-entries.js';

// The payment gate with the session rail on a real ledger; the chain is never reached: settling is
// observed, not run.

const MODEL = testCatalog().find('anthropic/claude-sonnet-4.5');
const REQUEST = {
  headers: { authorization: 'Bearer token' },
  url: '/v1/chat/completions',
  model: MODEL,
  request: { model: MODEL?.id, messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 },
} as unknown as AdmissionRequest;

async function sessionOf(store: Store, id: string): Promise<Address> {
  const wallet = privateKeyToAddress(generatePrivateKey());
  await storePlaceholderSession(store, { id, wallet });
  return wallet;
}

interface GateHooks {
  /** Runs as the payer's in-flight slot is being taken (what completes meanwhile). */
  beforeSlot?(): Promise<void>;
  /** Runs as the gate asks for the payer's lock. */
  lockAsked?(): void;
  /**
   * The method settles for real instead of noting the attempt: the chain is not reached as long as
   * nothing is owed any more once the gate holds the payer's lock.
   */
  settles?: boolean;
}

/** A gate whose session method names `payer` and notes each attempt to settle (unless it `settles`). */
function gateOf(store: Store, payer: Address, sessionId: string, hooks: GateHooks = {}) {
  const settleAttempts: Address[] = [];
  const method = sessionPaymentMethod({
    store,
    chain: {} as never,
    receiptTimeoutMs: 1_000,
    // As the placeholder session: an hour.
    authenticate: () => ({
      kind: 'wallet',
      wallet: payer,
      sessionId,
      sessionExpiresAt: new Date(Date.now() + 3_600_000),
    }),
  });
  const observed: PaymentMethod = {
    ...method,
    async identify(request): Promise<IdentifiedPayer> {
      const identified = await method.identify(request);
      return {
        ...identified,
        settleDebt: async () => {
          settleAttempts.push(identified.payer);
          return { headers: {}, moved: false };
        },
        // Settling is only noted: no caps, nothing owed.
        spending: async () => ({ limits: [], owedPicoUsd: 0n }),
      };
    },
  };
  const slots = localInFlightLimiter(1);
  const gate = createPaymentGate({
    methods: [hooks.settles ? method : observed],
    inFlight: {
      async acquire(wallet, reservePicoUsd) {
        await hooks.beforeSlot?.();
        return slots.acquire(wallet, reservePicoUsd);
      },
    },
    withPayerLock: (wallet, fn) => {
      hooks.lockAsked?.();
      return store.withPayerLock(wallet, fn);
    },
    paymentRequired: () => new GatewayError('payment_required', 'pay'),
    commissionBps: 1_000,
    balances: { usdcOf: async () => 1_000_000_000n },
    unproven: unprovenPolicy({
      store,
      payerMaxAtomic: 100_000n,
      hourlyCeilingPicoUsd: 10n ** 13n,
      counter: localHourlyCounter(),
    }),
  });
  return { gate, settleAttempts, slots };
}

/** What a settlement holding the payer's lock does (the collector's, one on completion): the debt paid. */
async function payDebt(store: Store, payer: Address): Promise<void> {
  const opened = await openSettlement(store, payer, 'session');
  if (!opened) throw new Error(`${payer} owes nothing`);
  await confirmSettlement(store, opened.id, { txHash: `0x${'ab'.repeat(32)}` });
}

/**
 * Admits a request of a payer owing one, while the test holds the payer's lock: `meanwhile` runs
 * once the request waits on it. Resolves with the request's admission or refusal.
 */
async function admittedAfterLockWait(
  store: Store,
  sessionId: string,
  meanwhile: (payer: Address) => Promise<void>,
) {
  const payer = await sessionOf(store, sessionId);
  await recordUsage(store, completedRequest(payer, 66_000_000n));
  let lockAsked!: () => void;
  const waiting = new Promise<void>((resolve) => {
    lockAsked = resolve;
  });
  const { gate, slots } = gateOf(store, payer, sessionId, { lockAsked, settles: true });
  let admission!: Promise<{ admitted?: Admission; refused?: unknown }>;
  await store.withPayerLock(payer, async () => {
    admission = gate.admit(REQUEST).then(
      (admitted) => ({ admitted }),
      (refused: unknown) => ({ refused }),
    );
    // Refused before it asks for the lock, it waits on nothing.
    await Promise.race([waiting, admission]);
    await meanwhile(payer);
  });
  return { ...(await admission), payer, slots };
}

describe.each(testDialects)('the payment gate on %s', (dialect) => {
  let store: Store;
  withTestStore(dialect, (opened) => {
    store = opened;
  });

  test('a request of the payer completing while another takes its slot is settled before that one goes on', async () => {
    const payer = await sessionOf(store, `race-${dialect}`);
    // Request A completes (its usage recorded, its slot given back) just as B takes the slot.
    const { gate, settleAttempts } = gateOf(store, payer, `race-${dialect}`, {
      beforeSlot: async () => {
        await recordUsage(store, completedRequest(payer, 66_000_000n));
      },
    });
    const admission = await gate.admit(REQUEST);
    admission.release();
    expect(settleAttempts).toEqual([payer]);
  });

  test('nothing owed: admitted without settling', async () => {
    const payer = await sessionOf(store, `clear-${dialect}`);
    const { gate, settleAttempts } = gateOf(store, payer, `clear-${dialect}`);
    const admission = await gate.admit(REQUEST);
    admission.release();
    expect(settleAttempts).toEqual([]);
  });

  test('a revoked session is a 401, and its slot is given back', async () => {
    const payer = await sessionOf(store, `revoked-${dialect}`);
    await revokeSession(store, `revoked-${dialect}`);
    const { gate, slots } = gateOf(store, payer, `revoked-${dialect}`);
    await expect(gate.admit(REQUEST)).rejects.toMatchObject({ code: 'unauthorized' });
    // The only slot is free again.
    await expect(slots.acquire(payer)).resolves.toMatchObject({ othersReservedPicoUsd: 0n });
  });

  test('a session revoked while its request waits on the payer lock: 401 once the lock is free, the debt paid first', async () => {
    const sessionId = `revoked-waiting-${dialect}`;
    const { refused, payer, slots } = await admittedAfterLockWait(store, sessionId, async (payer) => {
      await payDebt(store, payer);
      await revokeSession(store, sessionId);
    });
    expect(refused).toMatchObject({ code: 'unauthorized' });
    expect((await debtOf(store, payer)).owedAtomic).toBe(0n);
    await expect(slots.acquire(payer)).resolves.toMatchObject({ othersReservedPicoUsd: 0n });
  });

  test('a session expiring while its request waits on the payer lock: 401 once the lock is free', async () => {
    onTestFinished(() => {
      vi.useRealTimers();
    });
    const { refused, payer, slots } = await admittedAfterLockWait(
      store,
      `expiring-waiting-${dialect}`,
      async (payer) => {
        await payDebt(store, payer);
        // Two hours on: the session's hour is over.
        vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + 2 * 3_600_000 });
      },
    );
    expect(refused).toMatchObject({ code: 'unauthorized' });
    await expect(slots.acquire(payer)).resolves.toMatchObject({ othersReservedPicoUsd: 0n });
  });

  test('a session still standing once the lock is free: admitted', async () => {
    const { admitted } = await admittedAfterLockWait(store, `standing-${dialect}`, (payer) =>
      payDebt(store, payer),
    );
    expect(admitted?.responseHeaders).toEqual({});
    admitted?.release();
  });
});
