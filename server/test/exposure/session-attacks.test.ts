import type { Address } from 'viem';
import { afterAll, describe, expect, test } from 'vitest';
import type { LocalChain } from '../../devkit/chain/index.js';
import { debtOf } from '../../src/billing/ledger.js';
import {
  type AnthropicStep,
  authorize,
  type GatewayUnderTest,
  MODEL,
  newPayer,
  type Simulator,
  sessionGatewayConfig,
  startGateway,
  withSessionStack,
} from '../session/harness.js';

// Pay-after-use is safe only if the gateway never forwards what a payer cannot pay: on the session
// rail, what its delegation's cap still allows and what its account holds.

let local: LocalChain;
let anthropic: Simulator<AnthropicStep>;
let gateway: GatewayUnderTest;

withSessionStack(async (stack) => {
  ({ local, anthropic } = stack);
  gateway = await startGateway(sessionGatewayConfig(local, anthropic, { databaseUrl: stack.database.url }));
});

afterAll(() => gateway?.close());

async function rawChat(token: string, body: Record<string, unknown>) {
  const response = await fetch(`${gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, ...body }),
  });
  const json = (await response.json()) as { error?: { details?: Record<string, unknown> } };
  return { status: response.status, details: json.error?.details };
}

const owedBy = async (wallet: Address) => (await debtOf(gateway.store, wallet)).owedAtomic;

describe('a session whose delegation caps spending at 0.01 USDC', () => {
  test('eight concurrent requests of long prompts never leave it owing more than 0.01 USDC', async () => {
    const payer = await newPayer(local, 0);
    const session = await authorize(gateway, payer, { cap: 10_000n });
    // A 500-byte prompt and 100 output tokens may cost (~590 x 3.75 + 100 x 15) x 1.1, about 4,100
    // units: two fit in the cap. The provider bills each as much as it may.
    for (let i = 0; i < 8; i++)
      anthropic.script({ text: 'ok', usage: { input_tokens: 500, output_tokens: 100 }, delayMs: 300 });
    const answers = await Promise.all(
      Array.from({ length: 8 }, () =>
        rawChat(session.token, { max_tokens: 100, messages: [{ role: 'user', content: 'y'.repeat(500) }] }),
      ),
    );
    const served = answers.filter((answer) => answer.status === 200).length;
    expect(served).toBeGreaterThanOrEqual(1);
    expect(answers.every((answer) => [200, 402, 429].includes(answer.status))).toBe(true);
    // Billed at (500 x 3 + 100 x 15) x 1.1 = 3,300 units each.
    expect(await owedBy(payer.address)).toBe(BigInt(served) * 3_300n);
    expect(await owedBy(payer.address)).toBeLessThanOrEqual(10_000n);
  });
});

describe('an account that holds no USDC', () => {
  test('a counterfactual account with a session is refused before the provider, and costs no gas', async () => {
    const payer = await newPayer(local, 1, { fundUsdc: 0n, deploy: false, salt: 9 });
    const session = await authorize(gateway, payer);
    const calls = anthropic.log.length;
    const refused = await rawChat(session.token, { messages: [{ role: 'user', content: 'hi' }] });
    expect(refused.status).toBe(402);
    expect(refused.details).toMatchObject({
      reason: 'insufficient_balance',
      cap: 'balance',
      availableAtomic: '0',
    });
    expect(anthropic.log.length).toBe(calls);
    expect(await local.publicClient.getCode({ address: payer.address })).toBeUndefined();
    expect(await owedBy(payer.address)).toBe(0n);
  });
});
