import { x402Client } from '@x402/core/client';
import { decodePaymentSignatureHeader, encodePaymentSignatureHeader } from '@x402/core/http';
import type { PaymentRequired } from '@x402/core/types';
import { PERMIT2_ADDRESS, x402UptoPermit2ProxyABI, x402UptoPermit2ProxyAddress } from '@x402/evm';
import { UptoEvmScheme } from '@x402/evm/upto/client';
import { appendPaymentIdentifierToExtensions } from '@x402/extensions/payment-identifier';
import { wrapFetchWithPayment } from '@x402/fetch';
import { type Address, type Hex, maxUint256, numberToHex } from 'viem';
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from 'viem/accounts';
import { describe, expect, test } from 'vitest';
import { createLocalWalletClient, mintUsdc, testUsdcAbi, usdcBalance } from '../../devkit/chain/index.js';
import { permit2Address } from '../../devkit/contracts/permit2.js';
import { debtOf } from '../../src/billing/ledger.js';
import { openSettlement, type Settlement, settlementsOf } from '../../src/billing/settlements.js';
import { GAS_CAPS } from '../../src/payments/chain/gas-caps.js';
import { recordAuthorization } from '../../src/payments/x402/authorizations.js';
import type { UptoPayload } from '../../src/payments/x402/upto.js';
import { startGateway, temporaryDatabase } from '../support/chain-gateway.js';
import {
  chat,
  chatBody,
  LARGER,
  LARGER_COST,
  openaiClient,
  paymentsOf,
  recordingFetch,
  refused,
  requiredOf,
  requirementsAsked,
  SMALL,
  SMALL_COST,
  sendProof,
  useX402Stack,
} from './harness.js';

const stack = useX402Stack();
const treasury = () => stack.local.accounts.treasury.address;
const balanceOf = (address: Address) => usdcBalance(stack.local, address);

/** A fresh payer holding 10 USDC that approved Permit2 once, as an upto payer does before its first payment. */
async function uptoPayer(): Promise<PrivateKeyAccount> {
  const key = generatePrivateKey();
  const payer = privateKeyToAccount(key);
  await mintUsdc(stack.local, payer.address, 10_000_000n);
  await stack.local.testClient.setBalance({ address: payer.address, value: 10n ** 17n });
  const hash = await createLocalWalletClient(stack.local.chain, key).writeContract({
    address: stack.local.usdc,
    abi: testUsdcAbi,
    functionName: 'approve',
    args: [permit2Address, maxUint256],
  });
  await stack.local.publicClient.waitForTransactionReceipt({ hash });
  return payer;
}

/** The stock x402 client with only the `upto` EVM scheme registered, the local USDC allowed. */
function uptoClient(payer: PrivateKeyAccount, paymentId?: string, rpcUrl?: string): x402Client {
  const client = new x402Client();
  client.register(`eip155:${stack.local.chainId}`, new UptoEvmScheme(payer, rpcUrl ? { rpcUrl } : undefined));
  client.setSpendControls({
    allowedAssets: [{ network: `eip155:${stack.local.chainId}`, asset: stack.local.usdc }],
  });
  if (paymentId)
    client.onBeforePaymentCreation(async ({ paymentRequired }) => {
      paymentRequired.extensions ??= {};
      appendPaymentIdentifierToExtensions(paymentRequired.extensions, paymentId);
    });
  return client;
}

/** The official openai client paying through `@x402/fetch` wrapped once; every exchange recorded. */
function uptoOpenai(
  payer: PrivateKeyAccount,
  paymentId?: string,
  gatewayUrl = stack.gateway.url,
  rpcUrl?: string,
) {
  const recorder = recordingFetch();
  const openai = openaiClient(
    gatewayUrl,
    wrapFetchWithPayment(recorder.fetch, uptoClient(payer, paymentId, rpcUrl)),
  );
  return { openai, exchanges: recorder.exchanges };
}

async function completion(openai: ReturnType<typeof openaiClient>, usage = SMALL, body: object = chatBody) {
  stack.anthropic.script({ text: 'hi there', usage });
  return openai.chat.completions.create(body as typeof chatBody).withResponse();
}

/** Waits until the settlements of completed requests are done (they run once each answer is out). */
async function settled(payer?: Address): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const pending = await stack.gateway.store.db
      .selectFrom('settlements')
      .select('id')
      .where('status', 'in', ['pending', 'sent'])
      .execute();
    // A payer's settlement starts once its answer is out: until then its debt is owed.
    const owed = payer ? (await debtOf(stack.gateway.store, payer)).owedAtomic : 0n;
    if (pending.length === 0 && owed === 0n) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const rows = payer ? await settlementsOf(stack.gateway.store, payer, { limit: 5 }) : [];
  throw new Error(
    `the payer still owes, or settlements are still pending: ${JSON.stringify(rows.map((r) => [r.status, r.failureReason]))}`,
  );
}

describe('upto (Permit2)', () => {
  test('the 402 offers upto beside exact: a maximum of the request’s worst case, settled by the gateway’s relayer', async () => {
    const required = await requirementsAsked(stack);
    const [exact] = required.accepts;
    const upto = required.accepts.find((accept) => accept.scheme === 'upto');
    expect(exact).toMatchObject({ scheme: 'exact', amount: '0', extra: { name: 'USD Coin', version: '2' } });
    expect(exact?.extra?.assetTransferMethod).toBeUndefined();
    expect(upto).toMatchObject({
      scheme: 'upto',
      asset: stack.local.usdc,
      payTo: treasury(),
      extra: { assetTransferMethod: 'permit2', facilitatorAddress: stack.local.accounts.gateway.address },
    });
    // The model's whole output at its price, and the prompt's bound: more than the unproven payer limit.
    expect(BigInt(upto!.amount)).toBeGreaterThan(stack.gateway.config.exposure.unprovenPayerMaxAtomic);
    expect(upto!.maxTimeoutSeconds).toBeGreaterThan(
      stack.gateway.config.limits.upstreamCompletionTimeoutMs / 1000,
    );
  });

  test('three requests in a row by the stock client wrapped once: each served at once and settled at its exact cost after it completes', async () => {
    const payer = await uptoPayer();
    const { openai, exchanges } = uptoOpenai(payer);
    const [payerBefore, treasuryBefore] = [await balanceOf(payer.address), await balanceOf(treasury())];

    const costs = [SMALL_COST, LARGER_COST, SMALL_COST];
    for (const [i, usage] of [SMALL, LARGER, SMALL].entries()) {
      const { data, response } = await completion(openai, usage);
      expect(data.choices[0]?.message.content).toBe('hi there');
      // A first-time payer's whole output limit: its permit's maximum, not the unproven payer limit, bounds it.
      expect(response.headers.get('x-output-tokens-limit')).toBeNull();
      const stated = (data.usage as unknown as { cost_details: { total_pico_usd: string } }).cost_details;
      expect(BigInt(stated.total_pico_usd)).toBe(costs[i]! * 1_000_000n);
      await settled(payer.address);
      expect((await debtOf(stack.gateway.store, payer.address)).owedAtomic).toBe(0n);
    }

    // One 402 and one paid request each: the single wrap pays every request.
    expect(exchanges.map((exchange) => exchange.status)).toEqual([402, 200, 402, 200, 402, 200]);
    expect(await paymentsOf(stack, payer.address)).toEqual(costs);
    const total = costs.reduce((sum, cost) => sum + cost, 0n);
    expect(payerBefore - (await balanceOf(payer.address))).toBe(total);
    expect((await balanceOf(treasury())) - treasuryBefore).toBe(total);
    const settlements = await settlementsOf(stack.gateway.store, payer.address, { limit: 10 });
    expect(settlements.map((s) => [s.status, s.amountAtomic]).reverse()).toEqual(
      costs.map((cost) => ['confirmed', cost]),
    );
    // Sent by the gateway's relayer, each within the x402 settlement's gas cap.
    for (const settlement of settlements)
      expect(settlement.gasUsed).toBeLessThan(GAS_CAPS.x402UptoSettlement);
  });

  test('a payer with no ETH that never approved Permit2 pays with an EIP-2612 permit the relayer submits', async () => {
    const payer = privateKeyToAccount(generatePrivateKey());
    await mintUsdc(stack.local, payer.address, 10_000_000n);
    expect(await stack.local.publicClient.getBalance({ address: payer.address })).toBe(0n);
    // With an RPC to read its allowance and permit nonce, the stock client signs the permit the 402 asks for.
    const { openai, exchanges } = uptoOpenai(payer, undefined, stack.gateway.url, stack.local.rpcUrl);

    for (const usage of [SMALL, LARGER]) {
      await completion(openai, usage);
      await settled(payer.address);
    }

    const proof = decodePaymentSignatureHeader(exchanges[1]!.headers.get('PAYMENT-SIGNATURE')!);
    expect(proof.extensions?.eip2612GasSponsoring).toMatchObject({ info: { from: payer.address } });
    expect(await paymentsOf(stack, payer.address)).toEqual([SMALL_COST, LARGER_COST]);
    const settlements = await settlementsOf(stack.gateway.store, payer.address, { limit: 10 });
    expect(settlements.map((s) => s.status)).toEqual(['confirmed', 'confirmed']);
    for (const settlement of settlements)
      expect(settlement.gasUsed).toBeLessThan(GAS_CAPS.x402UptoSettlement);
  });

  test('a settlement the relayer sent but never recorded (a crash) is confirmed from the chain by the payer’s next request: paid once', async () => {
    const { local, gateway } = stack;
    const payer = await uptoPayer();
    await chat(stack, payer);
    // What the gateway had written when it crashed: the settlement opened, its permit recorded against it.
    const settlement = (await openSettlement(gateway.store, payer.address, 'x402', treasury())) as Settlement;
    expect(settlement.amountAtomic).toBe(SMALL_COST);
    const required = await requirementsAsked(stack);
    const accepted = required.accepts.find((accept) => accept.scheme === 'upto')!;
    const signed = await new UptoEvmScheme(payer).createPaymentPayload(2, { ...accepted, amount: '1000' });
    const { permit2Authorization: permit, signature } = signed.payload as UptoPayload;
    await recordAuthorization(gateway.store, {
      asset: PERMIT2_ADDRESS,
      payer: payer.address,
      nonce: numberToHex(BigInt(permit.nonce), { size: 32 }),
      valueAtomic: 1000n,
      validBefore: BigInt(permit.deadline) + 1n,
      settlementId: settlement.id,
      fromBlock: await local.publicClient.getBlockNumber(),
    });
    // ... and the relayer's transaction, which landed.
    const hash = await createLocalWalletClient(local.chain, local.accounts.gateway.privateKey).writeContract({
      address: x402UptoPermit2ProxyAddress,
      abi: x402UptoPermit2ProxyABI,
      functionName: 'settle',
      args: [
        {
          permitted: { token: permit.permitted.token as Address, amount: BigInt(permit.permitted.amount) },
          nonce: BigInt(permit.nonce),
          deadline: BigInt(permit.deadline),
        },
        SMALL_COST,
        payer.address,
        {
          to: permit.witness.to as Address,
          facilitator: permit.witness.facilitator as Address,
          validAfter: BigInt(permit.witness.validAfter),
        },
        signature as Hex,
      ],
    });
    await local.publicClient.waitForTransactionReceipt({ hash });
    const paid = await balanceOf(payer.address);

    const { exchanges } = await chat(stack, payer);

    // The debt was paid by that transaction: the zero-value proof is all the next request needs.
    expect(exchanges.map((exchange) => exchange.status)).toEqual([402, 200]);
    expect(await balanceOf(payer.address)).toBe(paid);
    expect(await paymentsOf(stack, payer.address)).toEqual([SMALL_COST]);
    const [reconciled] = await settlementsOf(gateway.store, payer.address, { limit: 1 });
    expect(reconciled).toMatchObject({ id: settlement.id, status: 'confirmed', txHash: hash });
  });

  test('a request that cost 0 moves nothing', async () => {
    const payer = await uptoPayer();
    const { openai } = uptoOpenai(payer);
    const before = await balanceOf(payer.address);
    const { data } = await completion(openai, { input_tokens: 0, output_tokens: 0 });
    expect(data.choices[0]?.message.content).toBe('hi there');
    await settled(payer.address);
    expect(await balanceOf(payer.address)).toBe(before);
    expect(await paymentsOf(stack, payer.address)).toEqual([]);
    expect(await settlementsOf(stack.gateway.store, payer.address, { limit: 10 })).toEqual([]);
  });

  test('a replayed upto proof is refused and charges nothing twice', async () => {
    const payer = await uptoPayer();
    const { openai, exchanges } = uptoOpenai(payer);
    await completion(openai, SMALL);
    await settled(payer.address);
    const proof = exchanges[1]!.headers.get('PAYMENT-SIGNATURE');
    expect(proof).toBeTruthy();
    const calls = stack.anthropic.log.length;

    const replayed = await sendProof(stack, 'PAYMENT-SIGNATURE', proof!);

    expect(replayed.status).toBe(402);
    expect(requiredOf(replayed.headers).error).toContain('this upto permit was used before');
    await settled(payer.address);
    expect(stack.anthropic.log.length).toBe(calls);
    expect(await paymentsOf(stack, payer.address)).toEqual([SMALL_COST]);
  });

  test('a retried payment identifier is neither paid nor served again', async () => {
    const payer = await uptoPayer();
    const id = `pay_${crypto.randomUUID().replaceAll('-', '')}`;
    const { openai } = uptoOpenai(payer, id);
    const calls = stack.anthropic.log.length;

    const first = await completion(openai, LARGER);
    await settled(payer.address);
    const retried = await refused(openai.chat.completions.create(chatBody));

    expect(retried.status).toBe(409);
    expect(retried.error).toMatchObject({
      code: 'payment_identifier_used',
      details: {
        paymentIdentifier: id,
        requestId: first.response.headers.get('x-request-id'),
        outcome: 'served',
      },
    });
    await settled(payer.address);
    expect(stack.anthropic.log.length - calls).toBe(1);
    expect(await paymentsOf(stack, payer.address)).toEqual([LARGER_COST]);
  });

  test('a maximum below the request’s worst case is refused with a 402 stating the least maximum, and nothing moves', async () => {
    const payer = await uptoPayer();
    const body = { ...chatBody, max_tokens: 1000 };
    const asked = await fetch(`${stack.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const required: PaymentRequired = requiredOf(asked.headers);
    const least = BigInt(required.accepts.find((accept) => accept.scheme === 'upto')!.amount);
    const short = {
      ...required,
      accepts: required.accepts
        .filter((accept) => accept.scheme === 'upto')
        .map((accept) => ({ ...accept, amount: (least - 1n).toString() })),
    };
    const proof = encodePaymentSignatureHeader(await uptoClient(payer).createPaymentPayload(short));
    const calls = stack.anthropic.log.length;

    const refusal = await fetch(`${stack.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'PAYMENT-SIGNATURE': proof },
      body: JSON.stringify(body),
    });

    expect(refusal.status).toBe(402);
    const answer = (await refusal.json()) as { error: { message: string; details: Record<string, string> } };
    expect(answer.error.details).toMatchObject({ reason: 'upto_maximum_too_low', cap: 'upto' });
    expect(answer.error.message).toContain('upto permit');
    expect(requiredOf(refusal.headers).accepts.find((accept) => accept.scheme === 'upto')?.amount).toBe(
      least.toString(),
    );
    expect(stack.anthropic.log.length).toBe(calls);
    await settled(payer.address);
    expect(await paymentsOf(stack, payer.address)).toEqual([]);
  });

  test('a permit does not lift the hourly ceiling on payers that never paid: its funds can move before it is settled', async () => {
    // The permit locks nothing: a payer's USDC can leave between admission and settlement, and move
    // on to the next fresh payer. The hour's ceiling bounds that, as for every payer not yet proven.
    const database = temporaryDatabase();
    const capped = await startGateway({
      ...stack.gateway.config,
      databaseUrl: database.url,
      exposure: { ...stack.gateway.config.exposure, unprovenHourlyMaxPicoUsd: 2_000_000_000n },
    });
    try {
      const payer = await uptoPayer();
      const { openai } = uptoOpenai(payer, undefined, capped.url);
      const calls = stack.anthropic.log.length;
      const refusal = await refused(completion(openai, SMALL));
      expect(refusal.status).toBe(429);
      expect(refusal.error).toMatchObject({ code: 'rate_limited', details: { reason: 'unproven_exposure' } });
      expect(refusal.headers?.get('retry-after')).toMatch(/^\d+$/);
      expect(stack.anthropic.log.length).toBe(calls);
      expect(await paymentsOf(stack, payer.address)).toEqual([]);
    } finally {
      await capped.close();
      database.remove();
    }
  });
});
