import type { Address } from 'viem';
import { afterAll, describe, expect, test, vi } from 'vitest';
import { emptyUsdc, usdcBalance } from '../../devkit/chain/index.js';
import { debtOf } from '../../src/billing/ledger.js';
import { settlementsOf } from '../../src/billing/settlements.js';
import { openStore, type Store } from '../../src/store/database.js';
import { type OrderingProbe, startOrderingProbe } from '../support/ordering-probe.js';
import {
  authorize,
  chat,
  newPayer,
  openaiFor,
  SMALL,
  SMALL_COST_ATOMIC,
  sessionGatewayConfig,
  startGateway,
  useSessionGateway,
} from './harness.js';

// SETTLE_ON_COMPLETION=true: a paid request's debt is settled as soon as its usage is recorded.
let probe: OrderingProbe;
let probeStore: Store;

const stack = useSessionGateway({
  config: async (config, { local, anthropic, database }) => {
    probeStore = openStore(database.url);
    probe = await startOrderingProbe({
      upstreamUrl: anthropic.url,
      store: probeStore,
      publicClient: local.publicClient,
    });
    return {
      ...config,
      settleOnCompletion: true,
      providers: { ...config.providers, anthropic: { ...config.providers.anthropic, baseUrl: probe.url } },
    };
  },
});

afterAll(async () => {
  await probe?.close();
  await probeStore?.close();
});

const confirmedAtomic = async (payer: Address) =>
  (await settlementsOf(stack.gateway.store, payer, { limit: 100 }))
    .filter((settlement) => settlement.status === 'confirmed')
    .reduce((sum, settlement) => sum + settlement.amountAtomic, 0n);

describe('settling on completion', () => {
  test('a paid request is settled on chain with no further request; the next one waits for a settlement in flight, then finds nothing owed', async () => {
    const payer = await newPayer(stack.local, 0, { salt: 40 });
    const client = openaiFor(stack.gateway, (await authorize(stack.gateway, payer)).token);
    const treasury = stack.local.accounts.treasury.address;
    const treasuryBefore = await usdcBalance(stack.local, treasury);

    const first = await probe.chat(client, payer.address);
    expect(first.status).toBe(200);
    expect(first.totalPicoUsd).toBeGreaterThan(0n);
    expect(first.headers.get('x-settlement-tx')).toBeNull();
    // Sent at once, while the first one's settlement is on its way: forwarded only once it is
    // confirmed (the probe checks the ledger and the chain as the request reaches the provider).
    expect((await probe.chat(client, payer.address)).status).toBe(200);

    // Nothing more is sent: the second request's debt is settled anyway.
    await vi.waitFor(
      async () => expect((await debtOf(stack.gateway.store, payer.address)).unpaidPicoUsd).toBe(0n),
      {
        timeout: 15_000,
        interval: 100,
      },
    );
    const paid = await confirmedAtomic(payer.address);
    expect(paid).toBeGreaterThan(0n);
    expect((await usdcBalance(stack.local, treasury)) - treasuryBefore).toBe(paid);

    // Nothing owed when it arrives: no settlement on its way in.
    const third = await probe.chat(client, payer.address);
    expect(third.status).toBe(200);
    expect(third.headers.get('x-settlement-tx')).toBeNull();
    expect(probe.violations).toEqual([]);
  });

  test('a settlement that fails in the background leaves the debt owed: the next request is refused with 402, not forwarded', async () => {
    // An account that empties itself while its request is served: its settlement cannot be paid.
    const payer = await newPayer(stack.local, 0, { salt: 41 });
    const client = openaiFor(stack.gateway, (await authorize(stack.gateway, payer)).token);
    const calls = stack.anthropic.log.length;
    stack.anthropic.script({ text: 'served', usage: SMALL, delayMs: 1_000 });
    const answering = probe.chat(client, payer.address);
    await vi.waitFor(() => expect(stack.anthropic.log.length).toBe(calls + 1), {
      timeout: 10_000,
      interval: 20,
    });
    await emptyUsdc(stack.local, payer.address);
    const answered = await answering;
    expect(answered.status).toBe(200);
    await vi.waitFor(
      async () => {
        const [settlement] = await settlementsOf(stack.gateway.store, payer.address, { limit: 1 });
        expect(settlement?.status).toBe('failed');
      },
      { timeout: 15_000, interval: 100 },
    );
    expect((await debtOf(stack.gateway.store, payer.address)).unpaidPicoUsd).toBe(answered.totalPicoUsd);

    const forwarded = probe.forwarded();
    const refused = await probe.chat(client, payer.address);
    expect(refused).toMatchObject({ status: 402, code: 'payment_required' });
    expect(probe.forwarded()).toBe(forwarded);
    expect(probe.violations).toEqual([]);
  });
});

describe('a shutdown', () => {
  test('waits for the settlements of requests that complete while it waits for them', async () => {
    const own = await startGateway({
      ...sessionGatewayConfig(stack.local, stack.anthropic, { databaseUrl: stack.database.url }),
      settleOnCompletion: true,
    });
    try {
      const payer = await newPayer(stack.local, 0, { salt: 42 });
      const client = openaiFor(own, (await authorize(own, payer)).token);
      stack.anthropic.script({ text: ['slow'], usage: SMALL, delayMs: 300 });
      const logged = stack.anthropic.log.length;
      const answer = chat(client);
      await vi.waitFor(() => expect(stack.anthropic.log.length).toBe(logged + 1));
      // Closing while the request runs: its settlement is queued only once it completes.
      const closing = own.app.close();
      expect((await answer).status).toBe(200);
      await closing;
      expect(await settlementsOf(own.store, payer.address)).toMatchObject([
        { status: 'confirmed', amountAtomic: SMALL_COST_ATOMIC },
      ]);
    } finally {
      await own.close();
    }
  });
});
