import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { debtOf } from '../../src/billing/ledger.js';
import { type GatewayUnderTest, startGateway, temporaryDatabase } from '../support/chain-gateway.js';
import { freshEoa, proofFor, SMALL, SMALL_COST, useX402Stack } from '../x402/harness.js';

// All payers that never paid together are held to UNPROVEN_EXPOSURE_MAX_USD_PER_HOUR of what they
// were served: past it they wait for the next hour (429), and payers that paid are not affected.

const stack = useX402Stack();
const SMALL_ANSWER = { text: 'hi', usage: SMALL };
const database = temporaryDatabase();
let capped: GatewayUnderTest;

beforeAll(async () => {
  // 0.002 USD an hour: one unproven request of at most ~0.0014 USD (a 60-token answer) fits at a time.
  capped = await startGateway({
    ...stack.gateway.config,
    databaseUrl: database.url,
    exposure: { ...stack.gateway.config.exposure, unprovenHourlyMaxPicoUsd: 2_000_000_000n },
  });
});

afterAll(async () => {
  await capped?.close();
  database.remove();
});

async function ask(proof: string) {
  const response = await fetch(`${capped.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'PAYMENT-SIGNATURE': proof },
    body: JSON.stringify({
      model: 'anthropic/claude-sonnet-4.5',
      max_tokens: 60,
      messages: [{ role: 'user', content: 'hello' }],
    }),
  });
  return {
    status: response.status,
    headers: response.headers,
    body: (await response.json()) as { error: Record<string, unknown> },
  };
}

describe('the hourly ceiling on payers that never paid', () => {
  test('past it, a new payer waits for the next hour; a payer that paid is still served', async () => {
    // Proven on the capped gateway before the hour's ceiling is used: served, then paid.
    const regular = await freshEoa(stack, 1_000_000n);
    const asCapped = { ...stack, gateway: capped };
    stack.anthropic.script(SMALL_ANSWER, SMALL_ANSWER);
    expect((await ask(await proofFor(asCapped, regular, 0n))).status).toBe(200);
    expect((await ask(await proofFor(asCapped, regular, SMALL_COST))).status).toBe(200);
    expect((await debtOf(capped.store, regular.address)).owedAtomic).toBe(SMALL_COST);

    // Each unproven request takes its worst case (~0.0014 USD) from the hour's ceiling while in flight,
    // and keeps what it cost (66 units) once served: a few are served, then the ceiling is reached.
    for (let i = 0; i < 30; i++) {
      const payer = await freshEoa(stack, 1_000_000n);
      stack.anthropic.script(SMALL_ANSWER);
      const answer = await ask(await proofFor(asCapped, payer, 0n));
      if (answer.status === 200) continue;
      expect(answer.status).toBe(429);
      expect(answer.body.error).toMatchObject({
        code: 'rate_limited',
        details: { reason: 'unproven_exposure' },
      });
      const retryAfter = Number(answer.headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThan(0);
      expect(retryAfter).toBeLessThanOrEqual(3_600);
      // A payer that paid is served all the same.
      const proven = await ask(await proofFor(asCapped, regular, SMALL_COST));
      expect(proven.status).toBe(200);
      expect(i).toBeGreaterThan(3);
      return;
    }
    throw new Error('thirty unproven payers were served past a ceiling of 0.002 USD an hour');
  });
});
