import OpenAI from 'openai';
import { expect, test } from 'vitest';
import { createPayerAccount, usdcBalance } from '../../devkit/chain/index.js';
import { debtOf } from '../../src/billing/ledger.js';
import { settlementsOf } from '../../src/billing/settlements.js';
import { authorizeWithSmartAccount } from '../../src/client/session-client.js';
import { chat, chatBody, SMALL, SMALL_COST, settlementOf, smartSigner, useX402Stack } from './harness.js';

const stack = useX402Stack();

test('an invalid session token is 401, not a 402 an x402 client would pay', async () => {
  const response = await fetch(`${stack.gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer not-a-token' },
    body: JSON.stringify(chatBody),
  });
  expect(response.status).toBe(401);
  expect(response.headers.get('PAYMENT-REQUIRED')).toBeNull();
  expect((await response.json()).error.code).toBe('unauthorized');
});

test('a smart account switching between the session and x402 rails owes one debt, paid once', async () => {
  const { local, gateway, anthropic } = stack;
  const smart = await createPayerAccount(local, local.accounts.payers[0]!.privateKey, {
    fundUsdc: 5_000_000n,
  });
  const session = await authorizeWithSmartAccount({
    gatewayUrl: gateway.url,
    smartAccount: smart.account,
    cap: 1_000_000n,
    expiresAt: new Date(Date.now() + 3600_000),
  });
  const bySession = new OpenAI({ baseURL: `${gateway.url}/v1`, apiKey: session.token, maxRetries: 0 });
  const start = await usdcBalance(local, smart.address);

  anthropic.script({ text: 'by session', usage: SMALL });
  await bySession.chat.completions.create(chatBody);
  expect((await debtOf(gateway.store, smart.address)).owedAtomic).toBe(SMALL_COST);

  // The x402 rail is asked for the debt the session rail left, and pays it.
  const byProof = await chat(stack, smartSigner(smart));
  expect(byProof.exchanges.map((e) => e.status)).toEqual([402, 402, 200]);
  expect(settlementOf(byProof.headers)).toMatchObject({ success: true, payer: smart.address });
  expect(await usdcBalance(local, smart.address)).toBe(start - SMALL_COST);

  // And the session rail settles what the x402 request cost before its next request.
  anthropic.script({ text: 'by session again', usage: SMALL });
  await bySession.chat.completions.create(chatBody);
  expect(await usdcBalance(local, smart.address)).toBe(start - 2n * SMALL_COST);
  expect((await debtOf(gateway.store, smart.address)).owedAtomic).toBe(SMALL_COST);
  const settled = await settlementsOf(gateway.store, smart.address);
  expect(settled.map((s) => [s.rail, s.status, s.amountAtomic])).toEqual([
    ['session', 'confirmed', SMALL_COST],
    ['x402', 'confirmed', SMALL_COST],
  ]);
});
