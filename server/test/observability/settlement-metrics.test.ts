import { describe, expect, test } from 'vitest';
import { authorize, newPayer, openaiFor, chat as sessionChat } from '../session/harness.js';
import { fundedEoa, useX402Stack, chat as x402Chat } from '../x402/harness.js';
import { parseExposition, type Sample, sampleValue } from './prometheus-text.js';

/** Both rails on a real chain: every settlement a request triggers is counted and timed. */
const stack = useX402Stack();

async function scrape(): Promise<Sample[]> {
  const res = await stack.gateway.app.inject({ method: 'GET', url: '/metrics' });
  expect(res.statusCode).toBe(200);
  return parseExposition(res.body);
}

const settlements = (samples: Sample[], rail: string, status: string) =>
  sampleValue(samples, 'paygate_settlements_total', { rail, status }) ?? 0;

describe('settlement metrics', () => {
  test('a session payer: the second request settles the first, confirmed and timed', async () => {
    const token = (await authorize(stack.gateway, await newPayer(stack.local, 0))).token;
    const client = openaiFor(stack.gateway, token);
    stack.anthropic.script({ text: 'one', usage: { input_tokens: 10, output_tokens: 2 } });
    await sessionChat(client);
    expect(settlements(await scrape(), 'session', 'confirmed')).toBe(0);

    stack.anthropic.script({ text: 'two', usage: { input_tokens: 10, output_tokens: 2 } });
    const { headers } = await sessionChat(client);
    expect(headers.get('x-settlement-tx')).toMatch(/^0x[0-9a-f]{64}$/);
    const samples = await scrape();
    expect(settlements(samples, 'session', 'confirmed')).toBe(1);
    expect(sampleValue(samples, 'paygate_settlement_duration_seconds_count', { rail: 'session' })).toBe(1);
    const seconds = sampleValue(samples, 'paygate_settlement_duration_seconds_sum', { rail: 'session' }) ?? 0;
    // At least the block it waited for (0.2 s blocks), well under the receipt timeout.
    expect(seconds).toBeGreaterThan(0);
    expect(seconds).toBeLessThan(30);
    // The second request is owed until the next one settles it.
    expect(sampleValue(samples, 'paygate_debt_outstanding_usd')).toBeGreaterThan(0);
  });

  test('a settlement over the session cap is counted as refused', async () => {
    const token = (await authorize(stack.gateway, await newPayer(stack.local, 2), { cap: 10_000n })).token;
    const client = openaiFor(stack.gateway, token);
    // 10,000 input tokens at $3 per million, plus commission: 33,000 atomic units, over the cap.
    stack.anthropic.script({ text: 'big', usage: { input_tokens: 10_000, output_tokens: 1 } });
    await sessionChat(client);
    await expect(sessionChat(client)).rejects.toMatchObject({ status: 402 });
    const samples = await scrape();
    expect(settlements(samples, 'session', 'refused')).toBe(1);
    // Only confirmed settlements are timed.
    expect(sampleValue(samples, 'paygate_settlement_duration_seconds_count', { rail: 'session' })).toBe(1);
  });

  test('an x402 payer: the proof that pays the first request is a confirmed x402 settlement', async () => {
    const signer = await fundedEoa(stack, 1);
    await x402Chat(stack, signer);
    await x402Chat(stack, signer);
    const samples = await scrape();
    expect(settlements(samples, 'x402', 'confirmed')).toBe(1);
    expect(sampleValue(samples, 'paygate_settlement_duration_seconds_count', { rail: 'x402' })).toBe(1);
  });

  test('the debt gauge rises with a paid request and falls back once its debt is settled', async () => {
    // Read from the ledger on each scrape; the earlier tests' debts are left as they are.
    const debt = async () => sampleValue(await scrape(), 'paygate_debt_outstanding_usd') ?? Number.NaN;
    const unproven = async () =>
      sampleValue(await scrape(), 'paygate_debt_outstanding_unproven_usd') ?? Number.NaN;
    const token = (await authorize(stack.gateway, await newPayer(stack.local, 3))).token;
    const client = openaiFor(stack.gateway, token);
    const before = await debt();
    const unprovenBefore = await unproven();
    const confirmedBefore = settlements(await scrape(), 'session', 'confirmed');

    stack.anthropic.script({ text: 'owed', usage: { input_tokens: 10, output_tokens: 2 } });
    await sessionChat(client);
    // 10 input and 2 output tokens: 66 USDC atomic units, 66e-6 USD, owed by a payer that never paid.
    expect((await debt()) - before).toBeCloseTo(66e-6, 12);
    expect((await unproven()) - unprovenBefore).toBeCloseTo(66e-6, 12);

    // The next request settles it before it goes out; the provider then fails it: nothing new owed.
    stack.anthropic.script({ httpError: { status: 500 } });
    await expect(sessionChat(client)).rejects.toMatchObject({ status: 502 });
    expect(settlements(await scrape(), 'session', 'confirmed')).toBe(confirmedBefore + 1);
    expect(await debt()).toBeCloseTo(before, 12);
    expect(await unproven()).toBeCloseTo(unprovenBefore, 12);
  });
});
