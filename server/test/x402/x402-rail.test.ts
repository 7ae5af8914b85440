import { decodePaymentSignatureHeader, encodePaymentSignatureHeader } from '@x402/core/http';
import type { PaymentPayload, PaymentRequired } from '@x402/core/types';
import {
  authorizationTypes,
  PERMIT2_ADDRESS,
  permit2WitnessTypes,
  x402ExactPermit2ProxyAddress,
} from '@x402/evm';
import { wrapFetchWithPayment } from '@x402/fetch';
import { APIConnectionError } from 'openai';
import { type Address, type Hash, type Hex, toHex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { beforeAll, describe, expect, test } from 'vitest';
import { createPayerAccount, emptyUsdc, mintUsdc, usdcBalance } from '../../devkit/chain/index.js';
import { debtOf } from '../../src/billing/ledger.js';
import { settlementsOf } from '../../src/billing/settlements.js';
import { createChainClient } from '../../src/payments/chain/chain-client.js';
import { createX402Rail, type PaymentFacilitator } from '../../src/payments/x402/index.js';
import type { AdmissionRequest } from '../../src/services/chat-contracts.js';
import { transferAuthorization } from '../chain/authorizations.js';
import { testCatalog } from '../support/catalog.js';
import { startGateway } from '../support/chain-gateway.js';
import {
  chat as chatAs,
  chatBody,
  fundedEoa,
  LARGER,
  LARGER_COST,
  openaiClient,
  type PayerSigner,
  payingClient,
  payingFetch,
  proofFor as proofOf,
  requiredOf,
  requirementsAsked,
  SMALL,
  SMALL_COST,
  sendProof as send,
  settlementOf,
  smartSigner,
  useX402Stack,
} from './harness.js';

const stack = useX402Stack();
let treasury: Address;

beforeAll(() => {
  treasury = stack.local.accounts.treasury.address;
});

const chat = (signer: PayerSigner, usage = SMALL) => chatAs(stack, signer, usage);
const sendProof = (header: string, value: string) => send(stack, header, value);
const proofFor = (signer: PayerSigner, amount: bigint, edit?: Parameters<typeof proofOf>[3]) =>
  proofOf(stack, signer, amount, edit);

describe('a request without credentials', () => {
  test('is 402 with x402 v2 requirements in the PAYMENT-REQUIRED header and the envelope', async () => {
    const response = await fetch(`${stack.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(chatBody),
    });
    expect(response.status).toBe(402);
    expect(response.headers.get('cache-control')).toBe('no-store');
    const required = requiredOf(response.headers);
    const accepts = [
      {
        scheme: 'exact',
        network: 'eip155:31337',
        asset: stack.local.usdc,
        amount: '0',
        payTo: treasury,
        maxTimeoutSeconds: 120,
        extra: { name: 'USD Coin', version: '2' },
      },
      {
        scheme: 'exact',
        network: 'eip155:31337',
        asset: stack.local.usdc,
        amount: '0',
        payTo: treasury,
        maxTimeoutSeconds: 120,
        extra: {
          name: 'USD Coin',
          version: '2',
          assetTransferMethod: 'erc7710',
          facilitatorAddresses: [stack.local.accounts.gateway.address],
        },
      },
      {
        scheme: 'upto',
        network: 'eip155:31337',
        asset: stack.local.usdc,
        // The request's worst case: its prompt's bound and the model's whole output, at its prices.
        amount: expect.stringMatching(/^[1-9]\d*$/),
        payTo: treasury,
        maxTimeoutSeconds: expect.any(Number),
        extra: {
          name: 'USD Coin',
          version: '2',
          assetTransferMethod: 'permit2',
          facilitatorAddress: stack.local.accounts.gateway.address,
        },
      },
    ];
    expect(required).toEqual({
      x402Version: 2,
      error: expect.stringContaining('payment required'),
      resource: {
        url: '/v1/chat/completions',
        description: expect.any(String),
        mimeType: 'application/json',
      },
      accepts,
      extensions: {
        'sign-in-with-x': expect.objectContaining({
          supportedChains: [{ chainId: 'eip155:31337', type: 'eip191' }],
        }),
        'payment-identifier': expect.objectContaining({ info: { required: false } }),
        eip2612GasSponsoring: expect.objectContaining({ info: expect.any(Object) }),
      },
    });
    const body = await response.json();
    expect(body).toEqual({
      data: null,
      error: {
        code: 'payment_required',
        type: 'invalid_request_error',
        param: null,
        message: required.error,
      },
      meta: { timestamp: expect.any(String), path: '/v1/chat/completions' },
      x402Version: 2,
      resource: required.resource,
      accepts,
      extensions: required.extensions,
    });
  });

  test('a proof header that is not base64 JSON is 400 naming the header', async () => {
    for (const header of ['PAYMENT-SIGNATURE', 'X-PAYMENT']) {
      const response = await sendProof(header, 'not a proof!');
      expect(response.status).toBe(400);
      const body = await response.json();
      expect(body.error).toMatchObject({ code: 'validation_error', field: header });
      expect(body.error.message).toContain(header);
    }
    const notAPayload = await sendProof(
      'PAYMENT-SIGNATURE',
      Buffer.from('{"x402Version":2}').toString('base64'),
    );
    expect(notAPayload.status).toBe(400);
    expect((await notAPayload.json()).error.message).toMatch(
      /^PAYMENT-SIGNATURE is not an x402 v2 payment payload/,
    );
  });
});

describe('an EOA paying with the stock x402 client through the openai client', () => {
  let payer: PayerSigner;
  const paid: Array<{ header: string; hash: Hash }> = [];

  beforeAll(async () => {
    payer = await fundedEoa(stack, 0);
  });

  test('the first request pays 0: the zero-value proof names the payer and no transaction is sent', async () => {
    const before = await Promise.all([
      usdcBalance(stack.local, payer.address),
      usdcBalance(stack.local, treasury),
    ]);
    const { completion, headers, exchanges } = await chat(payer);
    expect(exchanges.map((e) => e.status)).toEqual([402, 200]);
    expect(settlementOf(headers)).toEqual({
      success: true,
      transaction: '',
      network: 'eip155:31337',
      payer: payer.address,
    });
    expect(completion.usage).toMatchObject({
      cost: 0.000066,
      cost_details: { total_usd: '0.000066', total_pico_usd: '66000000' },
    });
    expect(headers.get('x-payment-owed')).toBe(SMALL_COST.toString());
    expect(
      await Promise.all([usdcBalance(stack.local, payer.address), usdcBalance(stack.local, treasury)]),
    ).toEqual(before);
    expect(await settlementsOf(stack.gateway.store, payer.address)).toEqual([]);
  });

  test('request N pays exactly the cost of request N-1 in USDC on chain, before it is forwarded', async () => {
    for (const [usage, owed, nextOwed] of [
      [LARGER, SMALL_COST, LARGER_COST],
      [SMALL, LARGER_COST, SMALL_COST],
    ] as const) {
      const before = await Promise.all([
        usdcBalance(stack.local, payer.address),
        usdcBalance(stack.local, treasury),
      ]);
      const forwardedBefore = stack.anthropic.log.length;
      const { headers, exchanges } = await chat(payer, usage);
      // Asked, named itself with a zero proof, asked the exact debt, paid it.
      expect(exchanges.map((e) => e.status)).toEqual([402, 402, 200]);
      expect(stack.anthropic.log.length).toBe(forwardedBefore + 1);
      const settlement = settlementOf(headers);
      expect(settlement).toMatchObject({ success: true, network: 'eip155:31337', payer: payer.address });
      const receipt = await stack.local.publicClient.getTransactionReceipt({
        hash: settlement.transaction as Hash,
      });
      expect(receipt.status).toBe('success');
      expect(await usdcBalance(stack.local, payer.address)).toBe(before[0] - owed);
      expect(await usdcBalance(stack.local, treasury)).toBe(before[1] + owed);
      expect(headers.get('x-payment-owed')).toBe(nextOwed.toString());
      const [latest] = await settlementsOf(stack.gateway.store, payer.address, { limit: 1 });
      expect(latest).toMatchObject({
        status: 'confirmed',
        rail: 'x402',
        amountAtomic: owed,
        txHash: receipt.transactionHash,
      });
      paid.push({ header: exchanges[2]!.headers.get('PAYMENT-SIGNATURE')!, hash: receipt.transactionHash });
    }
  });

  test('a streamed request pays the debt too; its own cost is stated in its last chunk, not in a header', async () => {
    stack.anthropic.script({ text: ['a', 'streamed', 'answer'], usage: LARGER });
    const before = await usdcBalance(stack.local, payer.address);
    const openai = openaiClient(stack.gateway.url, payingFetch(payingClient(stack.local, payer)));
    const { data: stream, response } = await openai.chat.completions
      .create({ ...chatBody, stream: true })
      .withResponse();
    let last: unknown;
    for await (const chunk of stream) last = chunk;
    expect(settlementOf(response.headers)).toMatchObject({ success: true, payer: payer.address });
    expect(response.headers.get('x-payment-owed')).toBeNull();
    expect(last).toMatchObject({ usage: { cost: 0.000132, cost_details: { total_pico_usd: '132000000' } } });
    expect(await usdcBalance(stack.local, payer.address)).toBe(before - SMALL_COST);
    expect((await debtOf(stack.gateway.store, payer.address)).owedAtomic).toBe(LARGER_COST);
    await chat(payer);
    expect(await usdcBalance(stack.local, payer.address)).toBe(before - SMALL_COST - LARGER_COST);
  });

  test('a proof is accepted once: its replay is refused, also after a restart on the same database', async () => {
    const [{ header }] = paid as [(typeof paid)[number]];
    const replay = await sendProof('PAYMENT-SIGNATURE', header);
    expect(replay.status).toBe(402);
    const body = await replay.json();
    expect(body.error.message).toMatch(/this payment proof was used before/);
    // Refused before its signature is checked: the 402 tells no one what the named address owes.
    expect(requiredOf(replay.headers).accepts[0]!.amount).toBe('0');

    await stack.gateway.close();
    stack.gateway = await startGateway(stack.gateway.config);
    const again = await sendProof('PAYMENT-SIGNATURE', header);
    expect(again.status).toBe(402);
    expect((await again.json()).error.message).toMatch(/this payment proof was used before/);
  });
});

describe('a proof that does not pay what is owed', () => {
  let payer: PayerSigner;

  beforeAll(async () => {
    payer = await fundedEoa(stack, 2);
    await chat(payer); // now owes SMALL_COST
  });

  test.each([
    ['less than', SMALL_COST - 1n],
    ['more than', SMALL_COST + 1n],
    ['nothing instead of', 0n],
  ])('carrying %s the debt is 402 with fresh requirements for exactly the debt', async (_, amount) => {
    const before = await usdcBalance(stack.local, payer.address);
    const response = await sendProof('PAYMENT-SIGNATURE', await proofFor(payer, amount));
    expect(response.status).toBe(402);
    const required = requiredOf(response.headers);
    expect(required.accepts[0]!.amount).toBe(SMALL_COST.toString());
    expect(required.error).toBe(
      `the proof carries ${amount} but the payer owes exactly ${SMALL_COST} USDC atomic units; sign an authorization for ${SMALL_COST}`,
    );
    const body = await response.json();
    expect(body.accepts[0].amount).toBe(SMALL_COST.toString());
    expect(body.error.message).toBe(required.error);
    expect(await usdcBalance(stack.local, payer.address)).toBe(before);
  });

  test.each([
    [
      'another network',
      (a: PaymentRequired['accepts'][number]) => ({ ...a, network: 'eip155:8453' as const }),
      /pays on network eip155:8453; this gateway accepts eip155:31337/,
    ],
    [
      'another asset',
      (a: PaymentRequired['accepts'][number]) => ({
        ...a,
        asset: '0x00000000000000000000000000000000000000bb',
      }),
      /pays in asset 0x0{38}bb/,
    ],
    [
      'another payee',
      (a: PaymentRequired['accepts'][number]) => ({
        ...a,
        payTo: '0x00000000000000000000000000000000000000cc',
      }),
      /payments go to the treasury/,
    ],
  ])(
    'paying on %s is refused with the reason, telling no debt before the signature is checked',
    async (_, edit, reason) => {
      const before = await usdcBalance(stack.local, payer.address);
      const response = await sendProof('PAYMENT-SIGNATURE', await proofFor(payer, SMALL_COST, edit));
      expect(response.status).toBe(402);
      const required = requiredOf(response.headers);
      expect(required.error).toMatch(reason);
      expect(required.accepts[0]!.amount).toBe('0');
      expect(await usdcBalance(stack.local, payer.address)).toBe(before);
    },
  );

  test("a refusal quotes the client's text cut short: its headers do not grow with what was sent", async () => {
    const proof = decodePaymentSignatureHeader(await proofFor(payer, SMALL_COST));
    const long = { ...proof, accepted: { ...proof.accepted, network: `eip155:${'9'.repeat(1_993)}` } };
    const response = await sendProof('PAYMENT-SIGNATURE', encodePaymentSignatureHeader(long as typeof proof));
    expect(response.status).toBe(402);
    expect(requiredOf(response.headers).error).toMatch(
      /^the proof pays on network eip155:9{73}…; this gateway accepts eip155:31337$/,
    );
  });

  test('a signature for another chain, presented as one for this chain, fails verification', async () => {
    const header = await proofFor(payer, SMALL_COST, (a) => ({ ...a, network: 'eip155:8453' }));
    const payload = JSON.parse(Buffer.from(header, 'base64').toString());
    payload.accepted.network = 'eip155:31337';
    const response = await sendProof('PAYMENT-SIGNATURE', encodePaymentSignatureHeader(payload));
    expect(response.status).toBe(402);
    const required = requiredOf(response.headers);
    expect(required.error).toMatch(/^the payment proof is not valid: invalid_exact_evm_signature$/);
    expect(required.accepts[0]!.amount).toBe('0');
  });

  // ERC-6492's magic suffix: 32 bytes of 0x6492 end a signature that wraps a deployment.
  const erc6492Suffix = '6492'.repeat(16);
  test.each([
    ['too short to wrap anything', `0x${'ab'.repeat(10)}${erc6492Suffix}`],
    ['whose wrapper does not decode', `0x${'00'.repeat(64)}${erc6492Suffix}`],
  ])('a signature with the ERC-6492 suffix %s is an invalid proof: 402, not 503', async (_, signature) => {
    const proof = decodePaymentSignatureHeader(await proofFor(payer, SMALL_COST));
    const forged = encodePaymentSignatureHeader({ ...proof, payload: { ...proof.payload, signature } });
    const response = await sendProof('PAYMENT-SIGNATURE', forged);
    expect(response.status).toBe(402);
    expect(response.headers.get('retry-after')).toBeNull();
    const required = requiredOf(response.headers);
    expect(required.error).toMatch(/^the payment proof is not valid: invalid_payload: /);
    expect(required.accepts[0]!.amount).toBe('0');
  });
});

describe('a proof whose payer is not the signer the facilitator checks', () => {
  test('an EIP-3009 authorization signed by no one beside a Permit2 one signed by someone else is 400: no one is billed', async () => {
    const victim = privateKeyToAccount(generatePrivateKey()).address;
    const signer = privateKeyToAccount(generatePrivateKey());
    const accepted = (await requirementsAsked(stack)).accepts[0]!;
    const validBefore = BigInt(Math.floor(Date.now() / 1000) + 100);
    const permit = {
      permitted: { token: stack.local.usdc, amount: 0n },
      spender: x402ExactPermit2ProxyAddress,
      nonce: 1n,
      deadline: validBefore,
      witness: { to: treasury, validAfter: 0n },
    };
    const signature = await signer.signTypedData({
      domain: { name: 'Permit2', chainId: stack.local.chainId, verifyingContract: PERMIT2_ADDRESS },
      types: permit2WitnessTypes,
      primaryType: 'PermitWitnessTransferFrom',
      message: permit,
    });
    const wire = (value: object) =>
      JSON.parse(JSON.stringify(value, (_, v) => (typeof v === 'bigint' ? v.toString() : v)));
    const header = encodePaymentSignatureHeader({
      x402Version: 2,
      accepted,
      payload: {
        signature,
        authorization: wire({ ...transferAuthorization(victim, treasury, 0n), validBefore }),
        permit2Authorization: wire({ from: signer.address, ...permit }),
      },
    });
    const forwarded = stack.anthropic.log.length;
    const response = await sendProof('PAYMENT-SIGNATURE', header);
    expect(response.status).toBe(400);
    expect((await response.json()).error).toMatchObject({
      code: 'validation_error',
      field: 'PAYMENT-SIGNATURE',
      message:
        'PAYMENT-SIGNATURE carries a Permit2 authorization; this gateway accepts them by the "upto" scheme, and EIP-3009 transferWithAuthorization by "exact"',
    });
    expect(stack.anthropic.log.length).toBe(forwarded);
    expect((await debtOf(stack.gateway.store, victim)).owedAtomic).toBe(0n);
  });

  /** The x402 rail on the gateway's ledger and chain, its proofs verified by `verify`: the payer it names. */
  const identifyWith = (header: string, verify: PaymentFacilitator['verify']) =>
    createX402Rail({
      store: stack.gateway.store,
      chain: createChainClient(stack.gateway.config.chain),
      facilitator: { announcesSends: true, verify, settle: () => Promise.reject(new Error('not here')) },
      receiptTimeoutMs: 1_000,
      commissionBps: stack.gateway.config.commissionBps,
      uptoValiditySeconds: 660,
    }).method.identify({
      headers: { 'payment-signature': header },
      url: '/v1/chat/completions',
      model: testCatalog().find('anthropic/claude-sonnet-4.5'),
      request: { messages: [{ role: 'user', content: 'hi' }] },
    } as unknown as AdmissionRequest);

  test('the facilitator is handed the signature and the authorization, nothing else the client sent', async () => {
    const payer = privateKeyToAccount(generatePrivateKey());
    const proof = decodePaymentSignatureHeader(await proofFor(payer, 0n));
    const padded = encodePaymentSignatureHeader({ ...proof, payload: { ...proof.payload, note: 'extra' } });
    const handed: PaymentPayload[] = [];
    const identified = await identifyWith(padded, async (payload) => {
      handed.push(payload);
      return { isValid: true, payer: payer.address };
    });
    expect(identified.payer).toBe(payer.address);
    expect(handed.map((payload) => payload.payload)).toEqual([proof.payload]);
  });

  test("a facilitator that names no payer (x402 makes it optional) verified the authorization's signer: taken", async () => {
    const payer = privateKeyToAccount(generatePrivateKey());
    const identified = await identifyWith(await proofFor(payer, 0n), async () => ({ isValid: true }));
    expect(identified.payer).toBe(payer.address);
  });

  test("a facilitator that verified someone else than the authorization's signer: 402, the payer is not taken", async () => {
    const payer = privateKeyToAccount(generatePrivateKey());
    const other = privateKeyToAccount(generatePrivateKey()).address;
    const header = await proofFor(payer, 0n);
    await expect(identifyWith(header, async () => ({ isValid: true, payer: other }))).rejects.toMatchObject({
      code: 'payment_required',
      message: `the payment proof is not valid: the facilitator verified a payment by ${other}, not by ${payer.address}`,
    });
  });
});

describe('a payer that cannot pay', () => {
  test("is refused with the chain's reason and nothing moves", async () => {
    // Served while it held USDC, then emptied its account.
    const payer = await fundedEoa(stack, 1, 1_000_000n);
    await chat(payer);
    await emptyUsdc(stack.local, payer.address);
    const response = await sendProof('PAYMENT-SIGNATURE', await proofFor(payer, SMALL_COST));
    expect(response.status).toBe(402);
    const required = requiredOf(response.headers);
    expect(required.error).toMatch(/^the payment proof is not valid: .*insufficient/i);
    expect((await debtOf(stack.gateway.store, payer.address)).owedAtomic).toBe(SMALL_COST);
    expect(await settlementsOf(stack.gateway.store, payer.address)).toEqual([]);
    // The twice-wrapped stock client does not hand that 402 back: its inner wrapper sees a 402 to a
    // request that already carries a proof and throws, which the openai client reports as a
    // connection error whose cause says so.
    const error = await chat(payer).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(APIConnectionError);
    expect(error).toMatchObject({ cause: { message: 'Payment already attempted' } });
  });
});

describe('round trips with the stock client', () => {
  let payer: PayerSigner;

  beforeAll(async () => {
    payer = await fundedEoa(stack, 5);
    await chat(payer); // now owes SMALL_COST
  });

  test('one wrapFetchWithPayment is not enough for a payer with debt: it retries once, with the first requirements', async () => {
    const openai = openaiClient(
      stack.gateway.url,
      wrapFetchWithPayment(fetch, payingClient(stack.local, payer)),
    );
    const error = await openai.chat.completions.create(chatBody).catch((e: unknown) => e);
    expect(error).toMatchObject({ status: 402, error: { code: 'payment_required' } });
    expect((await debtOf(stack.gateway.store, payer.address)).owedAtomic).toBe(SMALL_COST);
  });

  test('a client that remembers the requirements and x-payment-owed pays in one round trip', async () => {
    const { exchanges, headers } = await chat(payer);
    const remembered = requiredOf(exchanges[0]!.responseHeaders);
    const owed = headers.get('x-payment-owed')!;
    const proof = await payingClient(stack.local, payer).createPaymentPayload({
      ...remembered,
      accepts: [{ ...remembered.accepts[0]!, amount: owed }],
    });
    stack.anthropic.script({ text: 'at once', usage: SMALL });
    const response = await sendProof('PAYMENT-SIGNATURE', encodePaymentSignatureHeader(proof));
    expect(response.status).toBe(200);
    expect(settlementOf(response.headers)).toMatchObject({ success: true, payer: payer.address });
    expect(response.headers.get('x-payment-owed')).toBe(SMALL_COST.toString());
  });
});

describe('a smart account (HybridDeleGator, ERC-1271) as the payer', () => {
  test('pays 0, then exactly what it owes, from the smart account', async () => {
    const smart = await createPayerAccount(stack.local, stack.local.accounts.payers[3]!.privateKey, {
      fundUsdc: 5_000_000n,
    });
    const signer = smartSigner(smart);
    const first = await chat(signer);
    expect(settlementOf(first.headers)).toMatchObject({
      success: true,
      transaction: '',
      payer: smart.address,
    });
    const before = await usdcBalance(stack.local, smart.address);
    const second = await chat(signer);
    expect(second.exchanges.map((e) => e.status)).toEqual([402, 402, 200]);
    expect(settlementOf(second.headers)).toMatchObject({ success: true, payer: smart.address });
    expect(await usdcBalance(stack.local, smart.address)).toBe(before - SMALL_COST);
  });
});

describe('x402 v1 (X-PAYMENT)', () => {
  let payer: ReturnType<typeof privateKeyToAccount>;

  beforeAll(async () => {
    payer = privateKeyToAccount(stack.local.accounts.payers[4]!.privateKey);
    await mintUsdc(stack.local, payer.address, 1_000_000n);
    await chat(payer); // now owes SMALL_COST
  });

  /** A v1 payload as v1 clients build it: the same EIP-3009 authorization, the network by name. */
  async function v1Proof(value: bigint, network = 'eip155:31337'): Promise<string> {
    const now = BigInt(Math.floor(Date.now() / 1000));
    const authorization = {
      from: payer.address,
      to: treasury,
      value,
      validAfter: now - 600n,
      validBefore: now + 60n,
      nonce: toHex(crypto.getRandomValues(new Uint8Array(32))) as Hex,
    };
    const signature = await payer.signTypedData({
      domain: {
        name: 'USD Coin',
        version: '2',
        chainId: stack.local.chainId,
        verifyingContract: stack.local.usdc,
      },
      types: authorizationTypes,
      primaryType: 'TransferWithAuthorization',
      message: authorization,
    });
    const wire = Object.fromEntries(Object.entries(authorization).map(([k, v]) => [k, String(v)]));
    return encodePaymentSignatureHeader({
      x402Version: 1,
      scheme: 'exact',
      network,
      payload: { signature, authorization: wire },
    } as never);
  }

  test('an under-paying v1 proof gets a v1 body with the exact amount', async () => {
    const response = await sendProof('X-PAYMENT', await v1Proof(1n));
    expect(response.status).toBe(402);
    const body = await response.json();
    expect(body).toMatchObject({
      x402Version: 1,
      error: { code: 'payment_required' },
      accepts: [
        {
          scheme: 'exact',
          network: 'eip155:31337',
          maxAmountRequired: SMALL_COST.toString(),
          payTo: treasury,
          asset: stack.local.usdc,
        },
      ],
    });
  });

  test('a v1 proof of the debt is settled and answered with X-PAYMENT-RESPONSE', async () => {
    const before = await usdcBalance(stack.local, payer.address);
    stack.anthropic.script({ text: 'v1', usage: SMALL });
    const response = await sendProof('X-PAYMENT', await v1Proof(SMALL_COST));
    expect(response.status).toBe(200);
    expect(response.headers.get('PAYMENT-RESPONSE')).toBeNull();
    const settlement = settlementOf(response.headers, 'X-PAYMENT-RESPONSE');
    expect(settlement).toMatchObject({ success: true, network: 'eip155:31337', payer: payer.address });
    expect(await usdcBalance(stack.local, payer.address)).toBe(before - SMALL_COST);
    expect(response.headers.get('x-payment-owed')).toBe(SMALL_COST.toString());
  });
});
