import type { Address } from 'viem';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { describe, expect, test } from 'vitest';
import { recordUsage } from '../../src/billing/ledger.js';
import { ApiError } from '../../src/http/errors.js';
import { createPaymentGate, type IdentifiedPayer } from '../../src/payments/gate.js';
import { localInFlightLimiter } from '../../src/payments/in-flight.js';
import { sessionPaymentMethod } from '../../src/payments/session-method.js';
import type { AdmissionRequest } from '../../src/services/chat-contracts.js';
import type { Store } from '../../src/store/database.js';
import { insertSession, revokeSession } from '../../src/store/sessions.js';
import { testDialects, withTestStore } from '../support/db.js';
import { completedRequest } from '../support/usage-entries.js';

// The payment gate with the session rail on a real ledger; the chain is never reached: settling is
// observed, not run.

const REQUEST = {
  headers: { authorization: 'Bearer token' },
  url: '/v1/chat/completions',
} as unknown as AdmissionRequest;

async function sessionOf(store: Store, id: string): Promise<Address> {
  const wallet = privateKeyToAddress(generatePrivateKey());
  await insertSession(store, {
    id,
    wallet,
    delegation: '{}',
    delegationHash: `0x${id.padStart(64, '0')}`,
    signature: '0x',
    limits: '{}',
    expiresAt: new Date(Date.now() + 3_600_000),
  });
  return wallet;
}

/**
 * A gate whose session method names `payer` and notes each attempt to settle; `beforeSlot` runs as
 * the payer's in-flight slot is being taken (what completes meanwhile).
 */
function gateOf(store: Store, payer: Address, sessionId: string, beforeSlot = async () => {}) {
  const settleAttempts: Address[] = [];
  const method = sessionPaymentMethod({
    store,
    chain: {} as never,
    receiptTimeoutMs: 1_000,
    authenticate: () => ({ kind: 'wallet', wallet: payer, sessionId }),
  });
  const slots = localInFlightLimiter(1);
  const gate = createPaymentGate({
    methods: [
      {
        ...method,
        async identify(request): Promise<IdentifiedPayer> {
          const identified = await method.identify(request);
          return {
            ...identified,
            settleDebt: async () => {
              settleAttempts.push(identified.payer);
              return {};
            },
          };
        },
      },
    ],
    inFlight: {
      async acquire(wallet) {
        await beforeSlot();
        return slots.acquire(wallet);
      },
    },
    withPayerLock: store.withPayerLock,
    paymentRequired: () => new ApiError(402, 'payment_required', 'pay'),
  });
  return { gate, settleAttempts, slots };
}

describe.each(testDialects)('the payment gate on %s', (dialect) => {
  let store: Store;
  withTestStore(dialect, (opened) => {
    store = opened;
  });

  test('a request of the payer completing while another takes its slot is settled before that one goes on', async () => {
    const payer = await sessionOf(store, `race-${dialect}`);
    // Request A completes (its usage recorded, its slot given back) just as B takes the slot.
    const { gate, settleAttempts } = gateOf(store, payer, `race-${dialect}`, async () => {
      await recordUsage(store, completedRequest(payer, 66_000_000n));
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
    await expect(gate.admit(REQUEST)).rejects.toMatchObject({ statusCode: 401, code: 'unauthorized' });
    // The only slot is free again.
    await expect(slots.acquire(payer)).resolves.toBeTypeOf('function');
  });
});
