import type { PaymentRequired } from '@x402/core/types';
import {
  createSIWxPayload,
  encodeSIWxHeader,
  type SIWxExtension,
  wrapFetchWithSIWx,
} from '@x402/extensions/sign-in-with-x';
import { wrapFetchWithPayment } from '@x402/fetch';
import { APIError } from 'openai';
import { type Address, parseAbiItem } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { describe, expect, test, vi } from 'vitest';
import { createPayerAccount, usdcBalance } from '../../devkit/chain/index.js';
import { debtOf } from '../../src/billing/ledger.js';
import { startGateway } from '../support/chain-gateway.js';
import {
  chatBody,
  freshEoa,
  LARGER,
  LARGER_COST,
  openaiClient,
  type PayerSigner,
  payerOwingSmallCost,
  payingClient,
  requiredOf,
  requirementsAsked,
  type SignInSigner,
  SMALL,
  SMALL_COST,
  settlementOf,
  signedInOpenai,
  smartSigner,
  useX402Stack,
} from './harness.js';

const stack = useX402Stack();
const transferEvent = parseAbiItem('event Transfer(address indexed from, address indexed to, uint256 value)');

/** The stock client as docs/payments.md shows it (see `signedInOpenai`). */
const singleWrapClient = (signer: PayerSigner & SignInSigner, paymentId?: string) =>
  signedInOpenai(stack.gateway.url, stack.local, signer, paymentId);

async function completion(openai: ReturnType<typeof openaiClient>, usage = SMALL) {
  stack.anthropic.script({ text: 'hi there', usage });
  return openai.chat.completions.create(chatBody).withResponse();
}

/** A request expected to be refused: nothing is scripted, so the simulator's next answer stays queued. */
function refused(openai: ReturnType<typeof openaiClient>, body = chatBody): Promise<APIError> {
  return openai.chat.completions.create(body).then(
    () => {
      throw new Error('the request was served');
    },
    (error: unknown) => {
      if (!(error instanceof APIError)) throw error;
      return error;
    },
  );
}

/** The cost a completion states exactly, in pico-USD (`usage.cost_details`). */
const statedPicoUsd = (usage: unknown) =>
  BigInt((usage as { cost_details: { total_pico_usd: string } }).cost_details.total_pico_usd);

const treasuryBalance = () => usdcBalance(stack.local, stack.local.accounts.treasury.address);

/** USDC transfers the payer made, as the chain logged them. */
async function transfersFrom(payer: Address) {
  return stack.local.publicClient.getLogs({
    address: stack.local.usdc,
    event: transferEvent,
    args: { from: payer },
    fromBlock: 0n,
  });
}

/** The sign-in challenge of a 402 to a request without credentials. */
async function challenge(): Promise<SIWxExtension> {
  const required = await requirementsAsked(stack);
  const extension = required.extensions?.['sign-in-with-x'] as SIWxExtension | undefined;
  if (!extension) throw new Error('the 402 declares no sign-in-with-x extension');
  return extension;
}

/**
 * A SIGN-IN-WITH-X header answering a fresh challenge, signed by `signer` for `signer.address`;
 * `edit` changes the challenge's fields before they are signed.
 */
async function signIn(
  signer: SignInSigner,
  edit: (info: SIWxExtension['info']) => SIWxExtension['info'] = (info) => info,
): Promise<string> {
  const { info, supportedChains } = await challenge();
  const chain = supportedChains[0]!;
  return encodeSIWxHeader(
    await createSIWxPayload(
      { ...edit(info), chainId: chain.chainId, type: chain.type },
      signer,
      stack.gateway.url,
    ),
  );
}

/** What a request without a proof is asked, given its SIGN-IN-WITH-X header. */
async function askedWithSignIn(header: string): Promise<{ status: number; required: PaymentRequired }> {
  const response = await fetch(`${stack.gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'sign-in-with-x': header },
    body: JSON.stringify(chatBody),
  });
  return { status: response.status, required: requiredOf(response.headers) };
}

describe('every 402 declares the two extensions', () => {
  test('a sign-in challenge bound to the gateway, on its chain, and an optional payment identifier', async () => {
    const required = await requirementsAsked(stack);
    const host = new URL(stack.gateway.url).host;
    expect(required.extensions).toMatchObject({
      'sign-in-with-x': {
        info: {
          domain: host,
          uri: `http://${host}/v1/chat/completions`,
          version: '1',
          nonce: expect.stringMatching(/^[0-9a-f]{32}$/),
        },
        supportedChains: [{ chainId: `eip155:${stack.local.chainId}`, type: 'eip191' }],
      },
      'payment-identifier': { info: { required: false } },
    });
  });
});

describe('sign-in-with-x: a stock client wrapped once', () => {
  test('pays three requests in a row, each its predecessor’s exact cost in one paid round trip', async () => {
    const payer = await freshEoa(stack);
    const { openai, exchanges } = singleWrapClient(payer);
    const before = await treasuryBalance();

    const first = await completion(openai, SMALL);
    const second = await completion(openai, LARGER);
    const third = await completion(openai, SMALL);

    for (const { data } of [first, second, third]) expect(data.choices[0]?.message.content).toBe('hi there');
    expect(settlementOf(second.response.headers)).toMatchObject({ success: true, payer: payer.address });
    expect(settlementOf(third.response.headers)).toMatchObject({ success: true, payer: payer.address });
    // Request 1 settled nothing, 2 paid request 1, 3 paid request 2 (each the cost it stated); 3 is owed.
    const stated = [first, second].map(({ data }) => statedPicoUsd(data.usage));
    expect(((await treasuryBalance()) - before) * 1_000_000n).toBe(stated[0]! + stated[1]!);
    expect((await treasuryBalance()) - before).toBe(SMALL_COST + LARGER_COST);
    expect((await debtOf(stack.gateway.store, payer.address)).owedAtomic).toBe(SMALL_COST);
    // Per request: the bare 402, the signed-in 402 stating the debt, and one paid request.
    const paid = exchanges.filter((e) => e.headers.has('payment-signature'));
    expect(paid.map((e) => e.status)).toEqual([200, 200, 200]);
    expect(exchanges.map((e) => e.status)).toEqual([402, 402, 200, 402, 402, 200, 402, 402, 200]);
  });

  test('a smart account (ERC-1271) signs in and pays what it owes', async () => {
    const smart = await createPayerAccount(stack.local, generatePrivateKey(), { fundUsdc: 5_000_000n });
    const signer = {
      ...smartSigner(smart),
      signMessage: ({ message }: { message: string }) => smart.account.signMessage({ message }),
    };
    const { openai } = singleWrapClient(signer);
    await completion(openai);
    const before = await usdcBalance(stack.local, smart.address);
    const second = await completion(openai);
    expect(settlementOf(second.response.headers)).toMatchObject({ success: true, payer: smart.address });
    expect(await usdcBalance(stack.local, smart.address)).toBe(before - SMALL_COST);
  });

  test('without signing in, a single wrap is served once and then asked for its debt it does not pay', async () => {
    const payer = await freshEoa(stack);
    const openai = openaiClient(
      stack.gateway.url,
      wrapFetchWithPayment(fetch, payingClient(stack.local, payer)),
    );
    await completion(openai);
    const refusal = await refused(openai);
    expect(refusal.status).toBe(402);
    expect(refusal.message).toContain(`owes exactly ${SMALL_COST}`);
    expect((await debtOf(stack.gateway.store, payer.address)).owedAtomic).toBe(SMALL_COST);
  });

  test('a signed-in 402 states exactly what the wallet owes, and carries no new challenge', async () => {
    const payer = await payerOwingSmallCost(stack);
    const { status, required } = await askedWithSignIn(await signIn(payer));
    expect(status).toBe(402);
    expect(required.accepts[0]?.amount).toBe(SMALL_COST.toString());
    expect(required.error).toContain(`${payer.address} (signed in) owes exactly ${SMALL_COST}`);
    expect(required.extensions).not.toHaveProperty('sign-in-with-x');
  });

  test('a sign-in signed by another key neither reveals nor changes what is asked', async () => {
    const payer = await payerOwingSmallCost(stack);
    const forger = privateKeyToAccount(generatePrivateKey());
    const forged = await signIn({ address: payer.address, signMessage: forger.signMessage });
    const { status, required } = await askedWithSignIn(forged);
    expect(status).toBe(402);
    expect(required.accepts[0]?.amount).toBe('0');
    expect(required.error).toContain('invalid_siwx_signature');
    expect(required.error).not.toContain(SMALL_COST.toString());
    expect(required.extensions).toHaveProperty('sign-in-with-x');
    expect((await debtOf(stack.gateway.store, payer.address)).owedAtomic).toBe(SMALL_COST);
  });

  test('an expired or stale sign-in, signed by the wallet itself, proves nothing', async () => {
    const payer = await payerOwingSmallCost(stack);
    const minutesAgo = (minutes: number) => new Date(Date.now() - minutes * 60_000).toISOString();
    const expired = await signIn(payer, (info) => ({ ...info, expirationTime: minutesAgo(1) }));
    const stale = await signIn(payer, (info) => ({
      ...info,
      issuedAt: minutesAgo(6),
      expirationTime: undefined,
    }));
    for (const [header, reason] of [
      [expired, 'invalid_siwx_expired'],
      [stale, 'invalid_siwx_issued_at_too_old'],
    ] as const) {
      const { required } = await askedWithSignIn(header);
      expect(required.accepts[0]?.amount).toBe('0');
      expect(required.error).toContain(reason);
    }
  });

  test('a sign-in is read once: replayed, it proves nothing', async () => {
    const payer = await payerOwingSmallCost(stack);
    const header = await signIn(payer);
    expect((await askedWithSignIn(header)).required.accepts[0]?.amount).toBe(SMALL_COST.toString());
    const replayed = await askedWithSignIn(header);
    expect(replayed.required.accepts[0]?.amount).toBe('0');
    expect(replayed.required.error).toContain('invalid_siwx_nonce');
  });

  test('a sign-in whose fields no EIP-4361 message can hold proves nothing, and is never a 500', async () => {
    const payer = await payerOwingSmallCost(stack);
    const signed = JSON.parse(Buffer.from(await signIn(payer), 'base64').toString());
    for (const edit of [
      { statement: 'two\nlines' },
      { resources: ['not a uri'] },
      { signature: '0x1234' },
      { version: '2' },
    ]) {
      const header = Buffer.from(JSON.stringify({ ...signed, ...edit })).toString('base64');
      const { status, required } = await askedWithSignIn(header);
      expect(status, JSON.stringify(edit)).toBe(402);
      expect(required.accepts[0]?.amount, JSON.stringify(edit)).toBe('0');
      expect(required.error, JSON.stringify(edit)).toMatch(
        /^the sign-in \(SIGN-IN-WITH-X\) proves nothing: invalid_siwx_/,
      );
    }
  });

  test('a header that is not a sign-in is 400 naming it', async () => {
    const response = await fetch(`${stack.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'sign-in-with-x': 'not base64!' },
      body: JSON.stringify(chatBody),
    });
    expect(response.status).toBe(400);
    expect((await response.json()).error).toMatchObject({
      code: 'validation_error',
      field: 'SIGN-IN-WITH-X',
      message: expect.stringContaining('SIGN-IN-WITH-X is not a sign-in'),
    });
  });
});

describe('payment-identifier', () => {
  const clientWithPaymentId = (signer: PayerSigner & SignInSigner, id: string) =>
    singleWrapClient(signer, id).openai;

  test('a retried id is neither paid nor served again: the retry is told the first’s outcome', async () => {
    const payer = await payerOwingSmallCost(stack);
    const id = `pay_${crypto.randomUUID().replaceAll('-', '')}`;
    const openai = clientWithPaymentId(payer, id);
    const [calls, transfers, before] = [
      stack.anthropic.log.length,
      (await transfersFrom(payer.address)).length,
      await treasuryBalance(),
    ];

    const first = await completion(openai, LARGER);
    expect(settlementOf(first.response.headers)).toMatchObject({ success: true, payer: payer.address });
    const retried = await refused(openai);

    expect(retried.status).toBe(409);
    expect(retried.error).toMatchObject({
      code: 'payment_identifier_used',
      details: {
        paymentIdentifier: id,
        requestId: first.response.headers.get('x-request-id'),
        outcome: 'served',
        costPicoUsd: (LARGER_COST * 1_000_000n).toString(),
      },
    });
    expect(stack.anthropic.log.length - calls).toBe(1);
    expect((await transfersFrom(payer.address)).length - transfers).toBe(1);
    expect((await treasuryBalance()) - before).toBe(SMALL_COST);
    expect((await debtOf(stack.gateway.store, payer.address)).owedAtomic).toBe(LARGER_COST);
  });

  test('a retry while the first is in flight is 409 with retry-after, and is not forwarded', async () => {
    const payer = await freshEoa(stack);
    const id = `pay_${crypto.randomUUID().replaceAll('-', '')}`;
    const calls = stack.anthropic.log.length;
    stack.anthropic.script({ hang: true });
    const cancel = new AbortController();
    const first = clientWithPaymentId(payer, id)
      .chat.completions.create(chatBody, { signal: cancel.signal })
      .catch((error: unknown) => error);
    await vi.waitFor(() => expect(stack.anthropic.log.length).toBe(calls + 1), { timeout: 10_000 });

    const retried = await refused(clientWithPaymentId(payer, id));
    expect(retried.status).toBe(409);
    expect(retried.headers?.get('retry-after')).toBe('3');
    expect(retried.error).toMatchObject({ details: { paymentIdentifier: id, outcome: 'in_flight' } });
    expect(stack.anthropic.log.length).toBe(calls + 1);
    cancel.abort();
    await first;
  });

  test('ids are per payer: another payer’s same id is its own', async () => {
    const id = `pay_${crypto.randomUUID().replaceAll('-', '')}`;
    const [one, other] = await Promise.all([freshEoa(stack), freshEoa(stack)]);
    await completion(clientWithPaymentId(one, id));
    const { data } = await completion(clientWithPaymentId(other, id));
    expect(data.choices[0]?.message.content).toBe('hi there');
  });

  test('the same id on a different request is a conflict, and nothing is paid', async () => {
    const payer = await payerOwingSmallCost(stack);
    const id = `pay_${crypto.randomUUID().replaceAll('-', '')}`;
    const openai = clientWithPaymentId(payer, id);
    await completion(openai);
    const before = await treasuryBalance();
    const other = await refused(openai, {
      ...chatBody,
      messages: [{ role: 'user', content: 'another question' }],
    });
    expect(other.status).toBe(409);
    expect(other.error).toMatchObject({ details: { outcome: 'other_request' } });
    expect(await treasuryBalance()).toBe(before);
  });

  test('an id that breaks the extension’s format is 400 naming it', async () => {
    const payer = await freshEoa(stack);
    const client = payingClient(stack.local, payer);
    client.onBeforePaymentCreation(async ({ paymentRequired }) => {
      paymentRequired.extensions = {
        ...paymentRequired.extensions,
        'payment-identifier': { info: { required: false, id: 'short' } },
      };
    });
    const openai = openaiClient(
      stack.gateway.url,
      wrapFetchWithPayment(wrapFetchWithSIWx(fetch, payer), client),
    );
    const refusal = await refused(openai);
    expect(refusal.status).toBe(400);
    expect(refusal.message).toContain('extensions.payment-identifier');
  });

  test('an id outlives a restart of the gateway: the retry after it is told the first’s outcome', async () => {
    const payer = await freshEoa(stack);
    const id = `pay_${crypto.randomUUID().replaceAll('-', '')}`;
    const first = await completion(clientWithPaymentId(payer, id));
    const { config } = stack.gateway;
    await stack.gateway.close();
    stack.gateway = await startGateway(config);
    const retried = await refused(clientWithPaymentId(payer, id));
    expect(retried.status).toBe(409);
    expect(retried.error).toMatchObject({
      details: { requestId: first.response.headers.get('x-request-id'), outcome: 'served' },
    });
  });
});
