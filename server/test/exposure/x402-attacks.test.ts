import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from 'viem/accounts';
import { describe, expect, test } from 'vitest';
import { usdcBalance } from '../../devkit/chain/index.js';
import { debtOf } from '../../src/billing/ledger.js';
import { PDF } from '../support/documents.js';
import { chat, freshEoa, proofFor, SMALL_COST, useX402Stack } from '../x402/harness.js';

// Pay-after-use is safe only if the gateway never forwards what a payer cannot pay. These attacks
// pay by x402 proof, the rail anyone reaches with a fresh key and no prior contact.

const stack = useX402Stack();

/** About 40 KB of prompt: every token of it billed at Opus's prices if it were forwarded. */
const LONG_PROMPT = 'Summarize the following. '.repeat(1_600);
const OPUS = 'anthropic/claude-opus-4.5';

interface Refusal {
  status: number;
  body: { error: { code: string; details?: Record<string, unknown> } };
}

/** A chat request paid by `proof`, sent as a client building its own would. */
async function paidRequest(proof: string, body: Record<string, unknown>): Promise<Refusal> {
  const response = await fetch(`${stack.gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'PAYMENT-SIGNATURE': proof },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Refusal['body'] };
}

/** Eight requests at once, each with its own zero-value proof (a proof is used once). */
async function eightAtOnce(payer: PrivateKeyAccount, body: Record<string, unknown>): Promise<Refusal[]> {
  const proofs = await Promise.all(Array.from({ length: 8 }, () => proofFor(stack, payer, 0n)));
  return Promise.all(proofs.map((proof) => paidRequest(proof, body)));
}

describe('a fresh key with no USDC', () => {
  test('eight concurrent requests of long prompts at Opus’s maximum output: none reaches the provider', async () => {
    const attacker = privateKeyToAccount(generatePrivateKey());
    const calls = stack.anthropic.log.length;
    const answers = await eightAtOnce(attacker, {
      model: OPUS,
      max_tokens: 64_000,
      messages: [{ role: 'user', content: LONG_PROMPT }],
    });
    // Those past MAX_IN_FLIGHT_PER_PAYER wait (429); every other is refused for the balance.
    const refused = answers.filter((answer) => answer.status === 402);
    expect(refused.length).toBeGreaterThan(0);
    expect(answers.every((answer) => answer.status === 402 || answer.status === 429)).toBe(true);
    for (const answer of refused)
      expect(answer.body.error.details).toMatchObject({
        reason: 'insufficient_balance',
        cap: 'balance',
        availableAtomic: '0',
        maxAffordableTokens: 0,
      });
    expect(stack.anthropic.log.length).toBe(calls);
    expect((await debtOf(stack.gateway.store, attacker.address)).owedAtomic).toBe(0n);
  });

  test('without max_tokens: refused too, nothing affordable', async () => {
    const attacker = privateKeyToAccount(generatePrivateKey());
    const calls = stack.anthropic.log.length;
    const answer = await paidRequest(await proofFor(stack, attacker, 0n), {
      model: OPUS,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(answer?.status).toBe(402);
    expect(answer?.body.error.details).toMatchObject({
      reason: 'insufficient_balance',
      maxAffordableTokens: 0,
    });
    expect(stack.anthropic.log.length).toBe(calls);
  });
});

describe('a payer holding a little USDC', () => {
  test('a payer that paid once is no longer held to the unproven bound, only to its balance', async () => {
    const payer = await freshEoa(stack, 10_000_000n);
    const opus = { model: OPUS, max_tokens: 64_000, messages: [{ role: 'user', content: 'hi' }] };
    // Never paid: 1.76 USDC of worst case is beyond the 0.10 USDC an unproven payer may owe.
    const unproven = await paidRequest(await proofFor(stack, payer, 0n), opus);
    expect(unproven.status).toBe(402);
    expect(unproven.body.error.details).toMatchObject({ reason: 'unproven_payer_limit', cap: 'unproven' });
    // A small request served, then paid by the next one: the payer has paid.
    await chat(stack, payer);
    await chat(stack, payer);
    expect((await debtOf(stack.gateway.store, payer.address)).owedAtomic).toBe(SMALL_COST);
    stack.anthropic.script({ text: 'long answer', usage: { input_tokens: 10, output_tokens: 20 } });
    const proven = await paidRequest(await proofFor(stack, payer, SMALL_COST), opus);
    expect(proven.status).toBe(200);
  });

  test('a PDF counts at the whole context (its pages, not its bytes, are billed): refused to a payer who cannot pay that', async () => {
    // 0.05 USDC: a Sonnet request of a few words fits; one with a PDF of a few hundred bytes may be
    // billed 200,000 prompt tokens (0.825 USDC with commission), which does not.
    const payer = await freshEoa(stack, 50_000n);
    const calls = stack.anthropic.log.length;
    const withPdf = await paidRequest(await proofFor(stack, payer, 0n), {
      model: 'anthropic/claude-sonnet-4.5',
      max_tokens: 100,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Summarize.' },
            { type: 'file', file: { file_data: `data:application/pdf;base64,${PDF}` } },
          ],
        },
      ],
    });
    expect(withPdf.status).toBe(402);
    expect(withPdf.body.error.details).toMatchObject({ reason: 'insufficient_balance', cap: 'balance' });
    expect(stack.anthropic.log.length).toBe(calls);

    stack.anthropic.script({ text: 'ok', usage: { input_tokens: 5, output_tokens: 2 } });
    const withText = await paidRequest(await proofFor(stack, payer, 0n), {
      model: 'anthropic/claude-sonnet-4.5',
      max_tokens: 100,
      messages: [{ role: 'user', content: 'Summarize: the minutes say nothing was decided.' }],
    });
    expect(withText.status).toBe(200);
  });

  // Last: replies scripted for requests that were refused are left unused.
  test('eight concurrent requests: what it is served never exceeds its balance', async () => {
    // 0.05 USDC: below the 0.10 USDC held to an unproven payer, so its balance is what binds.
    const payer = await freshEoa(stack, 50_000n);
    for (let i = 0; i < 8; i++)
      stack.anthropic.script({
        text: 'ok',
        usage: { input_tokens: 2_000, output_tokens: 500 },
        delayMs: 300,
      });
    const answers = await eightAtOnce(payer, {
      model: 'anthropic/claude-sonnet-4.5',
      max_tokens: 500,
      messages: [{ role: 'user', content: 'x'.repeat(2_000) }],
    });
    // Each may cost (2,085 x 3.75 + 500 x 15) x 1.1 = about 16,851 units: at most two fit in 50,000
    // beside each other's reservation, the rest wait (429) or are refused.
    const served = answers.filter((answer) => answer.status === 200).length;
    expect(served).toBeGreaterThanOrEqual(1);
    expect(served).toBeLessThanOrEqual(2);
    for (const answer of answers.filter((a) => a.status !== 200)) expect([402, 429]).toContain(answer.status);
    const owed = (await debtOf(stack.gateway.store, payer.address)).owedAtomic;
    expect(owed).toBeLessThanOrEqual(await usdcBalance(stack.local, payer.address));
  });
});
