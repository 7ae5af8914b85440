import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, test } from 'vitest';
import { createLocalChain, type LocalChain } from '../../devkit/chain/index.js';
import { type AnthropicStep, startAnthropicSimulator } from '../../devkit/simulators/anthropic.js';
import type { Simulator } from '../../devkit/simulators/simulator-server.js';
import { debtOf } from '../../src/billing/ledger.js';
import { sessionStanding } from '../../src/billing/settlements.js';
import { authorize, MODEL, newPayer } from '../session/harness.js';
import { chainGatewayConfig, type GatewayUnderTest, startGateway } from '../support/chain-gateway.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';
import { sharedStoresConfigured } from '../support/gateway-pair.js';

// The exposure budget across instances: over random interleavings of one payer's concurrent
// requests, sent to two gateways sharing PostgreSQL and Redis, what the payer owes and has paid
// never exceeds what it could pay at admission (its session's cap, below its balance).

const CAP_ATOMIC = 40_000n;
const ROUNDS = 8;

/** A small deterministic generator (mulberry32), so a failing interleaving can be replayed from its seed. */
function generator(seed: number) {
  let state = seed;
  return (below: number) => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4_294_967_296) * below);
  };
}

describe.skipIf(!sharedStoresConfigured)('one payer across two instances (DATABASE_URL, REDIS_URL)', () => {
  let local: LocalChain;
  let anthropic: Simulator<AnthropicStep>;
  let database: TestDatabase;
  const gateways: GatewayUnderTest[] = [];

  afterAll(async () => {
    await Promise.all(gateways.map((gateway) => gateway.close()));
    await Promise.all([anthropic?.close(), local?.stop()]);
    await database?.drop();
  });

  test('random interleavings never leave a payer owing and paid more than its cap', async () => {
    [local, anthropic, database] = await Promise.all([
      createLocalChain(),
      startAnthropicSimulator(),
      createTestDatabase('postgres'),
    ]);
    const config = {
      ...chainGatewayConfig(local, anthropic, {
        databaseUrl: database.url,
        limits: { sessionMinCapAtomic: 1n, maxInFlightPerPayer: 6, collectorIntervalMs: 3_600_000 },
      }),
      redisUrl: process.env.REDIS_URL,
    };
    gateways.push(await startGateway(config), await startGateway(config));
    const payer = await newPayer(local, 3, { salt: Date.now() % 250 });
    const session = await authorize(gateways[0]!, payer, { cap: CAP_ATOMIC });
    const seed = Date.now() % 1_000_000;
    const random = generator(seed);
    const statuses = new Map<number, number>();

    for (let round = 0; round < ROUNDS; round++) {
      // Unscripted, the simulator bills a prompt of N words as N tokens and echoes up to max_tokens of it.
      const requests = Array.from({ length: 2 + random(5) }, async () => {
        // Long prompts and short answers: what a bound on the output alone would miss.
        const words = 300 + random(1_700);
        const maxTokens = random(4) === 0 ? undefined : 10 + random(50);
        await sleep(random(40));
        const response = await fetch(`${gateways[random(2)]!.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${session.token}`, 'content-type': 'application/json' },
          body: JSON.stringify({
            model: MODEL,
            messages: [{ role: 'user', content: 'w '.repeat(words) }],
            ...(maxTokens !== undefined && { max_tokens: maxTokens }),
          }),
        });
        await response.arrayBuffer();
        statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
      });
      await Promise.all(requests);
      const [debt, standing] = await Promise.all([
        debtOf(gateways[0]!.store, payer.address),
        sessionStanding(gateways[0]!.store, { sessionId: session.sessionId, wallet: payer.address }),
      ]);
      expect(
        debt.owedAtomic + standing.paid.paidAtomic,
        `seed ${seed}, round ${round}: owed ${debt.owedAtomic}, paid ${standing.paid.paidAtomic}`,
      ).toBeLessThanOrEqual(CAP_ATOMIC);
    }
    // Some were served and some refused: the bound was exercised, and nothing failed.
    expect(statuses.get(200) ?? 0, `seed ${seed}`).toBeGreaterThan(0);
    expect(
      [...statuses.keys()].every((status) => [200, 402, 429].includes(status)),
      `seed ${seed}`,
    ).toBe(true);
  }, 120_000);
});
