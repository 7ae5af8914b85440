import { randomUUID } from 'node:crypto';
import { encodePaymentSignatureHeader } from '@x402/core/http';
import OpenAI from 'openai';
import type { Address } from 'viem';
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from 'viem/accounts';
import { describe, expect, test, vi } from 'vitest';
import { mintUsdc, usdcBalance } from '../../devkit/chain/index.js';
import { debtOf } from '../../src/billing/ledger.js';
import { type Settlement, settlementsOf } from '../../src/billing/settlements.js';
import { sharedStoresConfigured, useGatewayPair } from '../support/gateway-pair.js';
import type { GatewayProcess } from '../support/gateway-process.js';
import { confirmedAmount, reconcileWithChain } from '../support/ledger-checks.js';
import { PROBE_MODEL } from '../support/ordering-probe.js';
import { payingClient, requiredOf, SMALL, SMALL_COST, settlementOf } from '../x402/harness.js';

// What several gateway processes behind a load balancer must share through PostgreSQL and Redis,
// proven across real processes (`src/main.ts` each): the x402 replay guard, the rate limits, and
// a settlement left in flight by an instance killed outright. Skipped without both, as in CI's
// absence of DATABASE_URL and REDIS_URL.

/** RATE_LIMIT_MAX of the pair of instances the rate-limit test starts. */
const RATE_LIMIT = 4;

describe.skipIf(!sharedStoresConfigured)(
  'gateway processes sharing PostgreSQL and Redis: state no process keeps alone',
  () => {
    const pair = useGatewayPair({
      sessionMinCapAtomic: 1n,
      // Debts are settled by the payers' own requests only: no collector settles behind a test's back.
      collectorIdleMs: 3_600_000,
      collectorIntervalMs: 60_000,
      // How long a request waits for a sent settlement's receipt before it is told to come back.
      settlementTimeoutMs: 1_000,
    });

    /** No settlement of anyone pending or sent: balances read now move only by what the test does. */
    async function quiet() {
      await vi.waitFor(
        async () =>
          expect(
            await pair.store.db
              .selectFrom('settlements')
              .select(['id', 'status'])
              .where('status', 'in', ['pending', 'sent'])
              .execute(),
          ).toEqual([]),
        { timeout: 10_000, interval: 100 },
      );
    }

    async function settlementStates(payer: Address): Promise<string[]> {
      return (await settlementsOf(pair.store, payer)).map((s) => `${s.status} ${s.amountAtomic}`);
    }

    /** Far beyond the idle wait: a session about to end is settled on completion, and by the collector. */
    const sessionPayer = (owner: number, gateways: GatewayProcess[]) =>
      pair.sessionPayer(owner, { gateways, expiresAt: new Date(Date.now() + 7 * 86_400_000) });

    describe('the x402 replay guard is one registry', () => {
      /** A v2 proof of `amount` signed by the stock client for the gateways' requirements. */
      async function proof(payer: PrivateKeyAccount, amount: bigint): Promise<string> {
        const asked = await fetch(`${pair.instances[0]!.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: PROBE_MODEL, messages: [{ role: 'user', content: 'how much?' }] }),
        });
        expect(asked.status).toBe(402);
        const required = requiredOf(asked.headers);
        const accepts = [{ ...required.accepts[0]!, amount: amount.toString() }];
        return encodePaymentSignatureHeader(
          await payingClient(pair.local, payer).createPaymentPayload({ ...required, accepts }),
        );
      }

      /**
       * The same PAYMENT-SIGNATURE to both processes at once; the pair.probe counts what is forwarded
       * (each request carries a marker of its own, no ordering check is due for it).
       */
      async function race(header: string) {
        pair.anthropic.script({ text: 'the one forwarded', usage: SMALL });
        const forwarded = pair.probe.forwarded();
        const answers = await Promise.all(
          pair.instances.map((gateway) =>
            fetch(`${gateway.url}/v1/chat/completions`, {
              method: 'POST',
              headers: { 'content-type': 'application/json', 'PAYMENT-SIGNATURE': header },
              body: JSON.stringify({
                model: PROBE_MODEL,
                messages: [{ role: 'user', content: `probe:${randomUUID()}` }],
              }),
            }),
          ),
        );
        expect(answers.map((answer) => answer.status).sort()).toEqual([200, 402]);
        expect(pair.probe.forwarded() - forwarded).toBe(1);
        const refused = answers.find((answer) => answer.status === 402)!;
        expect(requiredOf(refused.headers).error).toMatch(/this payment proof was used before/);
        return answers.find((answer) => answer.status === 200)!;
      }

      test('the same proof sent to both processes (zero-value naming the payer, then the debt): one served, one 402, paid once', async () => {
        const payer = privateKeyToAccount(generatePrivateKey());
        await mintUsdc(pair.local, payer.address, 1_000_000n);
        await quiet();
        const treasury = pair.local.accounts.treasury.address;
        const before = {
          payer: await usdcBalance(pair.local, payer.address),
          treasury: await usdcBalance(pair.local, treasury),
        };

        // A zero-value proof only names its payer: accepted once, and one request is recorded.
        const named = await race(await proof(payer, 0n));
        expect(settlementOf(named.headers).transaction).toBe('');
        expect((await debtOf(pair.store, payer.address)).owedAtomic).toBe(SMALL_COST);
        expect(await settlementStates(payer.address)).toEqual([]);

        // A proof of the debt: one process settles it, the other finds the proof used.
        const paid = await race(await proof(payer, SMALL_COST));
        const [confirmed, ...others] = await settlementsOf(pair.store, payer.address, {
          status: 'confirmed',
        });
        expect(others).toEqual([]);
        expect(confirmed).toMatchObject({ rail: 'x402', amountAtomic: SMALL_COST });
        expect(settlementOf(paid.headers).transaction).toBe(confirmed!.txHash);
        await quiet();
        expect(await confirmedAmount(pair.store, payer.address)).toBe(SMALL_COST);
        expect(await usdcBalance(pair.local, payer.address)).toBe(before.payer - SMALL_COST);
        expect(await usdcBalance(pair.local, treasury)).toBe(before.treasury + SMALL_COST);
        // The request the paid proof was served for is owed now, nothing more.
        expect((await debtOf(pair.store, payer.address)).owedAtomic).toBe(SMALL_COST);
        const reconciliation = await reconcileWithChain(pair.store, pair.local);
        expect(reconciliation.mismatches).toEqual([]);
        expect(reconciliation.checked.confirmedTransfers).toBeGreaterThanOrEqual(1);
      });
    });

    test('RATE_LIMIT_MAX is one counter per caller: the request beyond it is 429 whichever process answers', async () => {
      const limited = await Promise.all(
        [0, 1].map(() => pair.start({ ...pair.env, RATE_LIMIT_MAX: String(RATE_LIMIT) })),
      );
      try {
        // Authorized through A (unlimited): the limited pair counts this wallet's requests only.
        const payer = await sessionPayer(0, limited);
        const [a, b] = payer.clients as [OpenAI, OpenAI];
        const within = [];
        for (const client of [a, b, a, b]) within.push(await pair.probe.chat(client, payer.address));
        expect(
          within.map((answer) => `${answer.status} ${answer.headers.get('x-ratelimit-remaining')}`),
        ).toEqual(['200 3', '200 2', '200 1', '200 0']);
        const forwarded = pair.probe.forwarded();
        const beyond = [];
        for (const client of [a, b, a, b]) beyond.push(await pair.probe.chat(client, payer.address));
        expect(beyond.map((answer) => `${answer.status} ${answer.code}`)).toEqual(
          Array(4).fill('429 rate_limited'),
        );
        expect(pair.probe.forwarded()).toBe(forwarded);
        expect(pair.probe.violations).toEqual([]);
      } finally {
        await Promise.all(limited.map((instance) => instance.stop()));
      }
    });

    test('SIGKILL with a settlement sent and unmined: the other process waits for it, and the debt is paid once', async () => {
      const [a, b] = pair.instances as [GatewayProcess, GatewayProcess];
      const payer = await sessionPayer(1, [a, b]);
      const [onA, onB] = payer.clients as [OpenAI, OpenAI];
      // Its first request settles nothing: it owes SMALL_COST.
      pair.anthropic.script({ text: 'owed', usage: SMALL });
      expect((await pair.probe.chat(onA, payer.address)).status).toBe(200);
      expect((await debtOf(pair.store, payer.address)).owedAtomic).toBe(SMALL_COST);
      await quiet();
      const treasury = pair.local.accounts.treasury.address;
      const before = {
        payer: await usdcBalance(pair.local, payer.address),
        treasury: await usdcBalance(pair.local, treasury),
      };
      const forwarded = pair.probe.forwarded();
      let sent: Settlement | undefined;

      await pair.local.testClient.setAutomine(false);
      await pair.local.testClient.setIntervalMining({ interval: 0 });
      try {
        // A sends the settlement (it waits in the node's pool) and dies before it is mined.
        const interrupted = pair.probe.chat(onA, payer.address).catch((error: unknown) => error);
        await vi.waitFor(
          async () => expect(await settlementStates(payer.address)).toEqual([`sent ${SMALL_COST}`]),
          { timeout: 10_000, interval: 20 },
        );
        [sent] = await settlementsOf(pair.store, payer.address);
        await a.kill();
        expect(await interrupted).toBeInstanceOf(OpenAI.APIConnectionError);

        // B finds the debt being paid by A's transaction: it waits for that one, it pays nothing again.
        expect(await pair.probe.chat(onB, payer.address)).toMatchObject({
          status: 503,
          code: 'payments_unavailable',
        });
        expect(pair.probe.forwarded()).toBe(forwarded);
        const [still, ...more] = await settlementsOf(pair.store, payer.address);
        expect(more.map((s) => s.status)).toEqual([]);
        expect(still).toMatchObject({ id: sent!.id, status: 'sent', txHash: sent!.txHash });
      } finally {
        await pair.local.testClient.setAutomine(true);
      }
      await pair.local.testClient.mine({ blocks: 1 });

      // Mined: B's next request finds the debt paid by A's transaction and is served paying nothing.
      pair.anthropic.script({ text: 'served', usage: SMALL });
      const served = await pair.probe.chat(onB, payer.address);
      expect(served.status).toBe(200);
      expect(served.headers.get('x-settlement-tx')).toBeNull();
      const [paid, ...none] = await settlementsOf(pair.store, payer.address);
      expect(none).toEqual([]);
      // A's own transaction, recognized: no other was sent for the debt.
      expect(paid).toMatchObject({
        id: sent!.id,
        txHash: sent!.txHash,
        status: 'confirmed',
        amountAtomic: SMALL_COST,
      });
      expect(await usdcBalance(pair.local, payer.address)).toBe(before.payer - SMALL_COST);
      expect(await usdcBalance(pair.local, treasury)).toBe(before.treasury + SMALL_COST);

      // A restarted serves the payer again, settling what B's request left owed: once as well.
      const restarted = await pair.start();
      pair.instances[0] = restarted;
      pair.anthropic.script({ text: 'again', usage: SMALL });
      const again = await pair.probe.chat(payer.clientOf(restarted), payer.address);
      expect(`${again.status} ${again.headers.get('x-settlement-amount')}`).toBe(`200 ${SMALL_COST}`);
      expect(await settlementStates(payer.address)).toEqual([
        `confirmed ${SMALL_COST}`,
        `confirmed ${SMALL_COST}`,
      ]);
      expect(await usdcBalance(pair.local, payer.address)).toBe(before.payer - 2n * SMALL_COST);
      expect(await usdcBalance(pair.local, treasury)).toBe(before.treasury + 2n * SMALL_COST);
      expect(pair.probe.violations).toEqual([]);
      const reconciliation = await reconcileWithChain(pair.store, pair.local);
      expect(reconciliation.mismatches).toEqual([]);
    });
  },
);
