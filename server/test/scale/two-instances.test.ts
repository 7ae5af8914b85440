import { setTimeout as sleep } from 'node:timers/promises';
import OpenAI from 'openai';
import type { Address } from 'viem';
import { describe, expect, test, vi } from 'vitest';
import { usdcBalance } from '../../devkit/chain/index.js';
import { debtOf } from '../../src/billing/ledger.js';
import { sharedStoresConfigured, useGatewayPair } from '../support/gateway-pair.js';
import type { GatewayProcess } from '../support/gateway-process.js';
import { confirmedAmount, reconcileWithChain } from '../support/ledger-checks.js';
import type { ProbedAnswer } from '../support/ordering-probe.js';

// Several gateway processes behind a load balancer share one PostgreSQL and one Redis: CI sets
// DATABASE_URL and REDIS_URL; without both there is nothing to share and the suite is skipped.
const IN_FLIGHT_LIMIT = 3;
const SLOT_TTL_MS = 3_000;

describe.skipIf(!sharedStoresConfigured)(
  'two gateway processes sharing PostgreSQL (DATABASE_URL) and Redis (REDIS_URL)',
  () => {
    const pair = useGatewayPair({
      maxInFlightPerPayer: IN_FLIGHT_LIMIT,
      inFlightSlotTtlMs: SLOT_TTL_MS,
      sessionMinCapAtomic: 1n,
      collectorIdleMs: 1_000,
      collectorIntervalMs: 250,
    });

    /** One request that is retried while the gateway says to come back (429 in flight, 503 settling). */
    async function chatUntilServed(
      client: OpenAI,
      payer: Address,
      stream: boolean,
      refusals: ProbedAnswer[],
    ): Promise<ProbedAnswer> {
      for (let attempt = 1; attempt <= 100; attempt++) {
        const answer = await pair.probe.chat(client, payer, { stream });
        if (answer.status === 200) return answer;
        refusals.push(answer);
        await sleep(20 + Math.random() * 80);
      }
      throw new Error(`payer ${payer} was not served after 100 attempts`);
    }

    async function settledEverything(payers: Address[]) {
      await vi.waitFor(
        async () => {
          for (const payer of payers) expect((await debtOf(pair.store, payer)).owedPicoUsd).toBe(0n);
          const unfinished = await pair.store.db
            .selectFrom('settlements')
            .select('id')
            .where('status', 'in', ['pending', 'sent'])
            .execute();
          expect(unfinished).toEqual([]);
        },
        { timeout: 20_000, interval: 200 },
      );
    }

    test('two payers hammered through both instances: ordering rule, one settlement per debt, ledger equals chain', async () => {
      const payers = await Promise.all([pair.sessionPayer(0), pair.sessionPayer(1)]);
      const treasury = pair.local.accounts.treasury.address;
      const before = {
        treasury: await usdcBalance(pair.local, treasury),
        payers: await Promise.all(payers.map(({ payer }) => usdcBalance(pair.local, payer.address))),
      };
      const refusals: ProbedAnswer[] = [];
      // Per payer, four clients each send five requests one after another, alternating instances
      // and streaming every other one; the two payers at once, so both instances settle at once.
      const served = (
        await Promise.all(
          payers.flatMap(({ payer, clients }) =>
            [0, 1, 2, 3].map(async (client) => {
              const answers: ProbedAnswer[] = [];
              for (let round = 0; round < 5; round++) {
                const through = clients[(client + round) % 2] as OpenAI;
                answers.push(await chatUntilServed(through, payer.address, round % 2 === 1, refusals));
              }
              return answers;
            }),
          ),
        )
      ).flat();

      expect(pair.probe.violations).toEqual([]);
      // Only "come back" answers: in-flight bound reached, or a settlement still being confirmed.
      for (const refusal of refusals)
        expect(`${refusal.status} ${refusal.code}`).toMatch(
          /^(429 too_many_in_flight|503 payments_unavailable)$/,
        );

      // The last requests' debts are paid by the collector of whichever instance leads.
      const addresses = payers.map(({ payer }) => payer.address);
      await settledEverything(addresses);

      // No usage lost: each answer's stated cost is its record, and every record is paid once.
      const records = await pair.store.db
        .selectFrom('usage_records as u')
        .leftJoin('settlements as s', 's.id', 'u.settlement_id')
        .select(['u.request_id', 'u.total_pico', 's.status'])
        .where('u.payer', 'in', addresses)
        .execute();
      expect(records).toHaveLength(served.length);
      const byRequest = new Map(records.map((record) => [record.request_id, record]));
      for (const answer of served) {
        expect(byRequest.get(answer.requestId as string)).toEqual({
          request_id: answer.requestId,
          total_pico: answer.totalPicoUsd,
          status: 'confirmed',
        });
      }
      // Nothing was ever refused by the node (a nonce taken by the other instance) or paid twice.
      const failed = await pair.store.db
        .selectFrom('settlements')
        .select(['id', 'failure_reason'])
        .where('status', '=', 'failed')
        .execute();
      expect(failed).toEqual([]);

      const paid = await Promise.all(addresses.map((address) => confirmedAmount(pair.store, address)));
      expect(await usdcBalance(pair.local, treasury)).toBe(before.treasury + paid[0]! + paid[1]!);
      for (const [i, address] of addresses.entries())
        expect(await usdcBalance(pair.local, address)).toBe(before.payers[i]! - paid[i]!);
      const reconciliation = await reconcileWithChain(pair.store, pair.local);
      expect(reconciliation.mismatches).toEqual([]);
      expect(reconciliation.checked.confirmedTransfers).toBeGreaterThan(2);
    });

    test('the in-flight bound is shared: beyond it, either instance answers 429', async () => {
      const { payer, clients } = await pair.sessionPayer(2);
      const [a, b] = clients as [OpenAI, OpenAI];
      pair.probe.hold();
      const holding = [a, b, a].map((client) => pair.probe.chat(client, payer.address));
      await vi.waitFor(() => expect(pair.probe.waiting()).toBe(IN_FLIGHT_LIMIT), { timeout: 10_000 });

      const beyond = await Promise.all([b, a, b, a].map((client) => pair.probe.chat(client, payer.address)));
      expect(beyond.map((answer) => `${answer.status} ${answer.code}`)).toEqual(
        Array(4).fill('429 too_many_in_flight'),
      );

      pair.probe.release();
      expect((await Promise.all(holding)).map((answer) => answer.status)).toEqual([200, 200, 200]);
      // Released on completion, on both instances.
      expect((await pair.probe.chat(b, payer.address)).status).toBe(200);
      expect((await pair.probe.chat(a, payer.address)).status).toBe(200);
      expect(pair.probe.violations).toEqual([]);
    });

    test('an instance killed mid-request: its in-flight slots expire, the other instance takes over collecting', async () => {
      const leading = await Promise.all(pair.instances.map(collectorLeads));
      expect(leading.filter(Boolean)).toHaveLength(1);
      const leader = pair.instances[leading.indexOf(true)] as GatewayProcess;
      const survivor = pair.instances[leading.indexOf(false)] as GatewayProcess;
      const { payer, clients } = await pair.sessionPayer(3);
      const [onLeader, onSurvivor] = [
        clients[pair.instances.indexOf(leader)],
        clients[pair.instances.indexOf(survivor)],
      ] as [OpenAI, OpenAI];
      expect((await pair.probe.chat(onSurvivor, payer.address)).status).toBe(200);

      pair.probe.hold();
      const dying = [1, 2, 3].map(() =>
        pair.probe.chat(onLeader, payer.address).catch((error: Error) => error),
      );
      await vi.waitFor(() => expect(pair.probe.waiting()).toBe(IN_FLIGHT_LIMIT), { timeout: 10_000 });
      await leader.kill();
      pair.probe.release();
      for (const outcome of await Promise.all(dying))
        expect(outcome).toBeInstanceOf(OpenAI.APIConnectionError);

      // The dead instance's slots still count until their time to live runs out, then they are free.
      expect(await pair.probe.chat(onSurvivor, payer.address)).toMatchObject({
        status: 429,
        code: 'too_many_in_flight',
      });
      await vi.waitFor(
        async () => expect((await pair.probe.chat(onSurvivor, payer.address)).status).toBe(200),
        {
          timeout: 5 * SLOT_TTL_MS,
          interval: 250,
        },
      );
      await vi.waitFor(async () => expect(await collectorLeads(survivor)).toBe(true), { timeout: 10_000 });
      // Its last request is collected by the survivor, now the only collector.
      await settledEverything([payer.address]);
      expect(pair.probe.violations).toEqual([]);
      const reconciliation = await reconcileWithChain(pair.store, pair.local);
      expect(reconciliation.mismatches).toEqual([]);
    });
  },
);

async function collectorLeads(instance: GatewayProcess): Promise<boolean> {
  const res = await fetch(`${instance.url}/health`);
  const body = (await res.json()) as {
    data: { dependencies: { collector: { state: { leading: boolean } } } };
  };
  return body.data.dependencies.collector.state.leading;
}
