import type { Address } from 'viem';
import { describe, expect, test, vi } from 'vitest';
import { usdcBalance } from '../../devkit/chain/index.js';
import { debtOf } from '../../src/billing/ledger.js';
import { sessionStanding } from '../../src/billing/settlements.js';
import type { AuthorizedSession } from '../../src/client/index.js';
import {
  authorize,
  type GatewayUnderTest,
  MODEL,
  newPayer,
  sessionGatewayConfig,
  startGateway,
  useSessionGateway,
} from './harness.js';

// A settlement is one transfer of the whole debt: a debt beyond what the delegation still allows can
// never be paid through it. Such requests are refused before they reach the provider.

const stack = useSessionGateway();

const OPUS = 'anthropic/claude-opus-4.5';
/** 300 input and 2 output tokens of Sonnet ($3 / $15 per million, 10% commission): 1,023 atomic units. */
const DEBT = { input_tokens: 300, output_tokens: 2 } as const;
const DEBT_ATOMIC = 1_023n;
/**
 * The most a `max_tokens: 64` "hi" request to Sonnet costs: its 99-byte body bounds its prompt (99
 * tokens at the dearest prompt price, $3.75 per million for a cache write), plus 64 output tokens at
 * $15 per million, plus 10%: 1,464.4 units.
 */
const BOUND_64_ATOMIC = 1_465n;
/** A total cap of 2,000 units that paid DEBT_ATOMIC, and nothing owed: a `max_tokens: 64` request's refusal. */
const CAP_LEFT_977 = {
  reason: 'cap_reached',
  cap: 'total',
  capAtomic: '2000',
  availableAtomic: '977',
  owedAtomic: '0',
  inFlightAtomic: '0',
  requestMaxAtomic: BOUND_64_ATOMIC.toString(),
  // Beside its 99 prompt tokens, 977 units pay for 34 output tokens: (371.25 + 510) x 1.1 = 969.4.
  maxAffordableTokens: 34,
};

interface Answer {
  status: number;
  headers: Headers;
  body: { error: { code: string; message: string; details: Record<string, string> } };
}

async function rawChat(
  token: string,
  body: { model?: string; max_tokens?: number } = {},
  to: Pick<GatewayUnderTest, 'url'> = stack.gateway,
): Promise<Answer> {
  const res = await fetch(`${to.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      model: MODEL,
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 64,
      ...body,
    }),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Answer['body'] };
}

const balances = (payer: Address) =>
  Promise.all([usdcBalance(stack.local, payer), usdcBalance(stack.local, stack.treasury)]);

/** A request refused at admission: 402, nothing sent to the provider, no USDC moved. */
async function refusedUpFront(
  session: AuthorizedSession,
  body: Parameters<typeof rawChat>[1] = {},
  to: Pick<GatewayUnderTest, 'url'> = stack.gateway,
) {
  const [before, calls] = [await balances(session.wallet), stack.anthropic.log.length];
  const refused = await rawChat(session.token, body, to);
  expect(refused.status).toBe(402);
  expect(refused.body.error.code).toBe('payment_required');
  expect(stack.anthropic.log.length).toBe(calls);
  expect(await balances(session.wallet)).toEqual(before);
  return refused;
}

describe('a request whose own worst case exceeds the cap', () => {
  test('a per-period cap of 0.01 USDC refuses a 64,000-token Opus request, and serves a small one', async () => {
    const payer = await newPayer(stack.local, 0);
    const session = await authorize(stack.gateway, payer, { cap: 10_000n, period: { seconds: 86_400 } });
    const refused = await refusedUpFront(session, { model: OPUS, max_tokens: 64_000 });
    // A 100-byte body (100 prompt tokens at $6.25 per million, Opus's cache-write price) and 64,000
    // tokens at $25 per million, plus 10%: 1.7606875 USDC. The 0.01 USDC cap affords 338 output tokens.
    expect(refused.body.error.details).toEqual({
      reason: 'request_exceeds_cap',
      cap: 'period',
      capAtomic: '10000',
      availableAtomic: '10000',
      owedAtomic: '0',
      inFlightAtomic: '0',
      requestMaxAtomic: '1760688',
      maxAffordableTokens: 338,
    });
    expect(refused.body.error.message).toContain(
      '1.760688 USDC (a prompt of up to 100 tokens and 64000 output tokens of anthropic/claude-opus-4.5)',
    );
    expect(refused.body.error.message).toContain('0.01 USDC');
    expect(refused.body.error.message).toMatch(/set max_tokens to at most 338/);

    stack.anthropic.script({ text: 'small', usage: { input_tokens: 10, output_tokens: 2 } });
    expect((await rawChat(session.token, { model: OPUS, max_tokens: 64 })).status).toBe(200);
  });

  test('without max_tokens the output limit sent is the most the cap can pay for, and the answer says so', async () => {
    const payer = await newPayer(stack.local, 1);
    const session = await authorize(stack.gateway, payer, { cap: 10_000n });
    // An 82-byte body: 82 prompt tokens at $3.75 per million leave 0.01 USDC room for 585 output
    // tokens at $15 per million, 10% included (0.00999075 USDC).
    stack.anthropic.script({
      text: 'clamped',
      usage: { input_tokens: 8, output_tokens: 585 },
      stop: 'max_tokens',
    });
    const calls = stack.anthropic.log.length;
    const served = await rawChat(session.token, { max_tokens: undefined });
    expect(served.status).toBe(200);
    expect(served.headers.get('x-output-tokens-limit')).toBe('585');
    expect(stack.anthropic.log[calls]?.body).toMatchObject({ max_tokens: 585 });
  });
});

describe('what the delegation can still pay', () => {
  test('a total cap mostly used refuses a request its rest cannot cover, and serves one it can', async () => {
    const payer = await newPayer(stack.local, 2);
    const session = await authorize(stack.gateway, payer, { cap: 2_000n });
    stack.anthropic.script({ text: 'debt', usage: DEBT });
    expect((await rawChat(session.token)).status).toBe(200);

    // The debt is paid (977 units of the cap left), then the request is refused: it may cost 1,465.
    const calls = stack.anthropic.log.length;
    const [, treasuryBefore] = await balances(payer.address);
    const afterPaying = await rawChat(session.token);
    expect(afterPaying.status).toBe(402);
    expect(afterPaying.body.error.details).toEqual(CAP_LEFT_977);
    expect(afterPaying.body.error.message).toContain(
      "the session's total cap of 0.002 USDC has 0.000977 USDC left",
    );
    expect(stack.anthropic.log.length).toBe(calls);
    expect((await balances(payer.address))[1]).toBe(treasuryBefore + DEBT_ATOMIC);
    expect((await debtOf(stack.gateway.store, payer.address)).owedAtomic).toBe(0n);

    // Nothing owed now: a request the rest covers is served.
    stack.anthropic.script({ text: 'fits', usage: { input_tokens: 1, output_tokens: 1 } });
    expect((await rawChat(session.token, { max_tokens: 32 })).status).toBe(200);
  });

  test('a request refused for what the cap has left is refused again once nothing is owed', async () => {
    const payer = await newPayer(stack.local, 3);
    const session = await authorize(stack.gateway, payer, { cap: 2_000n });
    stack.anthropic.script({ text: 'debt', usage: DEBT });
    expect((await rawChat(session.token)).status).toBe(200);
    // The debt is paid, then the request refused: 977 units left, it may cost 1,465.
    const afterPaying = await rawChat(session.token);
    expect(afterPaying.body.error.details).toMatchObject({ reason: 'cap_reached', availableAtomic: '977' });
    expect((await debtOf(stack.gateway.store, payer.address)).owedAtomic).toBe(0n);

    // Sent again, owing nothing: still beyond what the delegation can pay, so not forwarded (served,
    // its debt could never be settled and the payer would be refused for good).
    const again = await refusedUpFront(session);
    expect(again.body.error.details).toEqual(CAP_LEFT_977);
    stack.anthropic.script({ text: 'fits', usage: { input_tokens: 1, output_tokens: 1 } });
    expect((await rawChat(session.token, { max_tokens: 32 })).status).toBe(200);
  });

  test('with SETTLE_ON_COMPLETION, a request beyond what the cap has left is refused owing nothing', async () => {
    const onCompletion = await startGateway({
      ...sessionGatewayConfig(stack.local, stack.anthropic, { databaseUrl: stack.database.url }),
      settleOnCompletion: true,
    });
    try {
      const payer = await newPayer(stack.local, 5);
      const session = await authorize(onCompletion, payer, { cap: 2_000n });
      const [payerBefore, treasuryBefore] = await balances(payer.address);
      stack.anthropic.script({ text: 'debt', usage: DEBT });
      expect((await rawChat(session.token, {}, onCompletion)).status).toBe(200);
      // Settled on completion, with no other request.
      await vi.waitFor(
        async () => {
          const standing = await sessionStanding(onCompletion.store, {
            sessionId: session.sessionId,
            wallet: payer.address,
          });
          expect(standing.mayOwe).toBe(false);
          expect(await balances(payer.address)).toEqual([
            payerBefore - DEBT_ATOMIC,
            treasuryBefore + DEBT_ATOMIC,
          ]);
        },
        { timeout: 10_000, interval: 50 },
      );

      const refused = await refusedUpFront(session, {}, onCompletion);
      expect(refused.body.error.details).toEqual(CAP_LEFT_977);
    } finally {
      await onCompletion.close();
    }
  });

  test('requests in flight at once count together: one the rest cannot cover beside them waits for them (429)', async () => {
    const payer = await newPayer(stack.local, 6);
    // 2,500 units: one `max_tokens: 64` request (at most 1,465) fits, two do not.
    const session = await authorize(stack.gateway, payer, { cap: 2_500n });
    stack.anthropic.script({ text: 'slow', usage: { input_tokens: 1, output_tokens: 1 }, delayMs: 1_500 });
    const calls = stack.anthropic.log.length;
    const slow = rawChat(session.token);
    await vi.waitFor(() => expect(stack.anthropic.log.length).toBe(calls + 1), {
      timeout: 5_000,
      interval: 10,
    });

    // Each fits alone; together they could owe more than the delegation can ever pay. Not refused
    // for good: the one in flight may cost far less than its most, so it is a wait (429, retried).
    const [before, waiting] = [await balances(session.wallet), stack.anthropic.log.length];
    const refused = await rawChat(session.token);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(refused.body.error.code).toBe('too_many_in_flight');
    expect(refused.body.error.details).toEqual({
      reason: 'requests_in_flight',
      cap: 'total',
      capAtomic: '2500',
      availableAtomic: '2500',
      owedAtomic: '0',
      inFlightAtomic: BOUND_64_ATOMIC.toString(),
      requestMaxAtomic: BOUND_64_ATOMIC.toString(),
      // 1,035.6 units left beside the one in flight: 99 prompt tokens and 38 output tokens (1,035.4).
      maxAffordableTokens: 38,
    });
    expect(refused.body.error.message).toMatch(
      /your requests in flight may cost up to 0\.001465 USDC .*retry when one of them completes/,
    );
    expect(stack.anthropic.log.length).toBe(waiting);
    expect(await balances(session.wallet)).toEqual(before);
    // A smaller one fits beside it: with 32 output tokens it may cost 937 units.
    stack.anthropic.script({ text: 'beside', usage: { input_tokens: 1, output_tokens: 1 } });
    expect((await rawChat(session.token, { max_tokens: 32 })).status).toBe(200);

    // Once the slow one completed, what it cost is owed instead: paid first, then the request fits.
    expect((await slow).status).toBe(200);
    stack.anthropic.script({ text: 'after', usage: { input_tokens: 1, output_tokens: 1 } });
    const after = await rawChat(session.token);
    expect(after.status).toBe(200);
    expect(after.headers.get('x-settlement-amount')).not.toBeNull();
  });

  test('a per-period cap refuses for the rest of its period, and serves again in the next', async () => {
    const payer = await newPayer(stack.local, 4);
    // A 60-second period that ends about 15 seconds from now.
    const startsAt = new Date(Date.now() - 45_000);
    const session = await authorize(stack.gateway, payer, { cap: 2_000n, period: { seconds: 60, startsAt } });
    stack.anthropic.script({ text: 'debt', usage: DEBT });
    expect((await rawChat(session.token)).status).toBe(200);
    const afterPaying = await rawChat(session.token);
    expect(afterPaying.status).toBe(402);
    expect(afterPaying.body.error.details).toMatchObject({
      reason: 'cap_reached',
      cap: 'period',
      availableAtomic: '977',
    });
    expect(afterPaying.body.error.message).toMatch(/left in this period.*wait for the next period/);
    // Owing nothing now, it is still refused until the period ends.
    expect((await debtOf(stack.gateway.store, payer.address)).owedAtomic).toBe(0n);
    const again = await refusedUpFront(session);
    expect(again.body.error.details).toMatchObject({
      reason: 'cap_reached',
      cap: 'period',
      availableAtomic: '977',
      owedAtomic: '0',
    });

    const nextPeriod = startsAt.getTime() + 60_000;
    await new Promise((resolve) => setTimeout(resolve, nextPeriod - Date.now() + 1_000));
    stack.anthropic.script({ text: 'next', usage: DEBT });
    expect((await rawChat(session.token)).status).toBe(200);
  }, 40_000);
});
