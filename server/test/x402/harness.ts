import { x402Client } from '@x402/core/client';
import {
  decodePaymentRequiredHeader,
  decodePaymentResponseHeader,
  decodePaymentSignatureHeader,
  encodePaymentSignatureHeader,
} from '@x402/core/http';
import type { PaymentRequired, SettleResponse } from '@x402/core/types';
import type { ExactEIP3009Payload } from '@x402/evm';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { appendPaymentIdentifierToExtensions } from '@x402/extensions/payment-identifier';
import { createSIWxClientExtension, wrapFetchWithSIWx } from '@x402/extensions/sign-in-with-x';
import { wrapFetchWithPayment } from '@x402/fetch';
import OpenAI, { APIError } from 'openai';
import { type Address, type Hash, type Hex, parseAbiItem } from 'viem';
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, expect } from 'vitest';
import {
  createLocalChain,
  type LocalChain,
  mintUsdc,
  type PayerAccount,
  testUsdcAbi,
} from '../../devkit/chain/index.js';
import { type FacilitatorServer, startFacilitatorServer } from '../../devkit/facilitator.js';
import { type AnthropicStep, startAnthropicSimulator } from '../../devkit/simulators/anthropic.js';
import type { Simulator } from '../../devkit/simulators/simulator-server.js';
import { debtOf } from '../../src/billing/ledger.js';
import type { LimitsConfig } from '../../src/config.js';
import {
  signTransferAuthorization,
  splitSignature,
  type TransferAuthorization,
} from '../chain/authorizations.js';
import { type RpcProxy, startRpcProxy } from '../faults/rpc-proxy.js';
import {
  chainGatewayConfig,
  type GatewayUnderTest,
  startGateway,
  temporaryDatabase,
} from '../support/chain-gateway.js';

export const chatBody = {
  model: 'anthropic/claude-sonnet-4.5',
  messages: [{ role: 'user' as const, content: 'hello' }],
};
// At $3 / $15 per million tokens plus 10% commission, 10 input and 2 output tokens cost exactly
// 66 USDC atomic units (66e-6 USD), so each payment is a whole number a test can name.
export const SMALL = { input_tokens: 10, output_tokens: 2 };
export const SMALL_COST = 66n;
export const LARGER = { input_tokens: 20, output_tokens: 4 };
export const LARGER_COST = 132n;

/** Anything that signs EIP-712 typed data for an address: a viem LocalAccount, or a smart account. */
export interface PayerSigner {
  address: Address;
  signTypedData(typedData: {
    domain: Record<string, unknown>;
    types: Record<string, unknown>;
    primaryType: string;
    message: Record<string, unknown>;
  }): Promise<Hex>;
}

/** A stock x402 client for the local chain: the `exact` EVM scheme, the local USDC allowed. */
export function payingClient(local: LocalChain, signer: PayerSigner): x402Client {
  const client = new x402Client();
  registerExactEvmScheme(client, { signer });
  client.setSpendControls({ allowedAssets: [{ network: `eip155:${local.chainId}`, asset: local.usdc }] });
  return client;
}

/**
 * fetch that pays as the stock client does, wrapped twice: a payer with debt is asked 0 (which
 * names it) and then the amount it owes, and one `wrapFetchWithPayment` retries only once.
 */
export function payingFetch(client: x402Client, base: typeof fetch = fetch): typeof fetch {
  return wrapFetchWithPayment(wrapFetchWithPayment(base, client), client);
}

/** Anything that signs an EIP-191 message for an address (a sign-in): a LocalAccount, or a smart account. */
export interface SignInSigner {
  address: Address;
  signMessage(args: { message: string }): Promise<Hex>;
}

/**
 * The official client paying as docs/payments.md shows it: `@x402/fetch` wrapped once around the sign-in
 * extension's fetch (which answers the first 402's challenge, so the 402 the payment client reads
 * states the debt), the sign-in client extension registered, and with `paymentId`, every proof
 * carrying it (`payment-identifier`). Every exchange is recorded.
 */
export function signedInOpenai(
  gatewayUrl: string,
  local: LocalChain,
  signer: PayerSigner & SignInSigner,
  paymentId?: string,
) {
  return signedInOpenaiPaying(gatewayUrl, payingClient(local, signer), signer, paymentId);
}

/** `signedInOpenai` paying through a given x402 client (another scheme's, or one with policies). */
export function signedInOpenaiPaying(
  gatewayUrl: string,
  client: x402Client,
  signer: SignInSigner,
  paymentId?: string,
) {
  client.registerExtension(createSIWxClientExtension({ signers: [signer] }));
  if (paymentId)
    client.onBeforePaymentCreation(async ({ paymentRequired }) => {
      paymentRequired.extensions ??= {};
      appendPaymentIdentifierToExtensions(paymentRequired.extensions, paymentId);
    });
  const recorder = recordingFetch();
  const paid = wrapFetchWithPayment(wrapFetchWithSIWx(recorder.fetch, signer), client);
  return { openai: openaiClient(gatewayUrl, paid), exchanges: recorder.exchanges };
}

/** Records every request a fetch sends and every response it gets, headers included. */
export function recordingFetch() {
  const exchanges: Array<{ headers: Headers; status: number; responseHeaders: Headers }> = [];
  const recorded: typeof fetch = async (input, init) => {
    const request = new Request(input, init);
    const response = await fetch(request);
    exchanges.push({ headers: request.headers, status: response.status, responseHeaders: response.headers });
    return response;
  };
  return { fetch: recorded, exchanges };
}

/**
 * The official client paying by x402: it sends no Authorization header, which would name a session
 * (and an invalid token is 401, never a 402 the x402 client could answer).
 */
export function openaiClient(gatewayUrl: string, fetchImpl: typeof fetch): OpenAI {
  return new OpenAI({
    baseURL: `${gatewayUrl}/v1`,
    apiKey: 'unused',
    defaultHeaders: { Authorization: null },
    fetch: fetchImpl,
    maxRetries: 0,
  });
}

export function settlementOf(headers: Headers, name = 'PAYMENT-RESPONSE'): SettleResponse {
  const value = headers.get(name);
  if (!value) throw new Error(`no ${name} header`);
  return decodePaymentResponseHeader(value);
}

export function requiredOf(headers: Headers): PaymentRequired {
  const value = headers.get('PAYMENT-REQUIRED');
  if (!value) throw new Error('no PAYMENT-REQUIRED header');
  return decodePaymentRequiredHeader(value);
}

/** A running local chain, provider simulator and gateway (and remote facilitator when asked). */
export interface X402Stack {
  local: LocalChain;
  anthropic: Simulator<AnthropicStep>;
  gateway: GatewayUnderTest;
  facilitator?: FacilitatorServer;
  /** The proxy between the gateway and the chain, when asked: the test fails or stalls the gateway's calls. */
  rpc?: RpcProxy;
}

/**
 * Starts the stack before the file's tests and stops it after them; the fields are set once
 * `beforeAll` ran. With `remoteFacilitator`, the gateway settles through a facilitator server that
 * sends from the last payer key (tests leave that one to it). With `rpcProxy`, the gateway reaches
 * the chain through an RPC proxy; the test's own clients reach it directly. With `adminToken`, the
 * gateway takes that operator token.
 */
export function useX402Stack(
  options: {
    remoteFacilitator?: boolean;
    rpcProxy?: boolean;
    limits?: Partial<LimitsConfig>;
    adminToken?: string;
  } = {},
): X402Stack {
  const stack = {} as X402Stack;
  const database = temporaryDatabase();
  beforeAll(async () => {
    [stack.local, stack.anthropic] = await Promise.all([createLocalChain(), startAnthropicSimulator()]);
    if (options.remoteFacilitator)
      stack.facilitator = await startFacilitatorServer({
        chain: stack.local.chain,
        privateKey: stack.local.accounts.payers.at(-1)!.privateKey,
      });
    if (options.rpcProxy) stack.rpc = await startRpcProxy(stack.local.rpcUrl);
    const config = chainGatewayConfig(stack.local, stack.anthropic, {
      databaseUrl: database.url,
      facilitatorUrl: stack.facilitator?.url,
      limits: options.limits,
    });
    stack.gateway = await startGateway({
      ...config,
      chain: { ...config.chain, rpcUrl: stack.rpc?.url ?? config.chain.rpcUrl },
      adminToken: options.adminToken,
    });
  });
  afterAll(async () => {
    await stack.gateway?.close();
    await stack.rpc?.close();
    await Promise.all([stack.facilitator?.close(), stack.anthropic?.close(), stack.local?.stop()]);
    database.remove();
  });
  return stack;
}

/** An EOA payer (a chain kit payer key) holding `usdc` atomic units more. */
export function fundedEoa(stack: X402Stack, index: number, usdc = 10_000_000n): Promise<PrivateKeyAccount> {
  return fundedAccount(stack, stack.local.accounts.payers[index]!.privateKey, usdc);
}

/** An EOA payer of a fresh key holding `usdc` atomic units: for suites that need more payers than the kit's keys. */
export function freshEoa(stack: X402Stack, usdc = 10_000_000n): Promise<PrivateKeyAccount> {
  return fundedAccount(stack, generatePrivateKey(), usdc);
}

/** A payer of a fresh key holding 1 USDC whose first request was served: it owes SMALL_COST. */
export async function payerOwingSmallCost(stack: X402Stack): Promise<PrivateKeyAccount> {
  const payer = await freshEoa(stack, 1_000_000n);
  await chat(stack, payer);
  expect((await debtOf(stack.gateway.store, payer.address)).owedAtomic).toBe(SMALL_COST);
  return payer;
}

async function fundedAccount(stack: X402Stack, privateKey: Hex, usdc: bigint): Promise<PrivateKeyAccount> {
  const account = privateKeyToAccount(privateKey);
  await mintUsdc(stack.local, account.address, usdc);
  return account;
}

/** A smart account as an x402 signer: it signs, its owner's key answers ERC-1271 checks. */
export function smartSigner(payer: PayerAccount): PayerSigner {
  return {
    address: payer.address,
    signTypedData: (typedData) =>
      payer.account.signTypedData(typedData as Parameters<typeof payer.account.signTypedData>[0]),
  };
}

/** One chat request through the openai client paying with the stock x402 client; every exchange recorded. */
export async function chat(stack: X402Stack, signer: PayerSigner, usage = SMALL) {
  stack.anthropic.script({ text: 'hi there', usage });
  const recorder = recordingFetch();
  const openai = openaiClient(
    stack.gateway.url,
    payingFetch(payingClient(stack.local, signer), recorder.fetch),
  );
  const { data, response } = await openai.chat.completions.create(chatBody).withResponse();
  return { completion: data, headers: response.headers, exchanges: recorder.exchanges };
}

/** A raw chat request with a proof header, as a client that builds its own would send it. */
export function sendProof(stack: X402Stack, header: string, value: string): Promise<Response> {
  return fetch(`${stack.gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', [header]: value },
    body: JSON.stringify(chatBody),
  });
}

/**
 * A request with a proof paying the payer's debt of SMALL_COST, the provider scripted to answer it:
 * its status, its settlement's transaction (PAYMENT-RESPONSE) and its error code.
 */
export async function payDebt(stack: X402Stack, payer: PayerSigner) {
  stack.anthropic.script({ text: 'paid', usage: SMALL });
  const response = await sendProof(stack, 'PAYMENT-SIGNATURE', await proofFor(stack, payer, SMALL_COST));
  const body = (await response.json()) as { error?: { code?: string } };
  return {
    status: response.status,
    tx: response.ok ? (settlementOf(response.headers).transaction as Hash) : undefined,
    code: body.error?.code,
  };
}

/** What the gateway asks of a chat request without credentials (the PAYMENT-REQUIRED of its 402). */
export async function requirementsAsked(stack: X402Stack): Promise<PaymentRequired> {
  const asked = await fetch(`${stack.gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(chatBody),
  });
  return requiredOf(asked.headers);
}

/** A v2 proof of `amount` signed by the stock client against the gateway's requirements edited by `edit`. */
export async function proofFor(
  stack: X402Stack,
  signer: PayerSigner,
  amount: bigint,
  edit: (accepts: PaymentRequired['accepts'][number]) => PaymentRequired['accepts'][number] = (a) => a,
): Promise<string> {
  const required = await requirementsAsked(stack);
  const client = new x402Client();
  registerExactEvmScheme(client, { signer });
  client.setSpendControls(false);
  const accepts = required.accepts.map((a) => edit({ ...a, amount: amount.toString() }));
  return encodePaymentSignatureHeader(await client.createPaymentPayload({ ...required, accepts }));
}

/** The EIP-3009 authorization a v2 proof header carries, as the token takes it. */
export function authorizationOf(header: string): TransferAuthorization {
  const { authorization } = decodePaymentSignatureHeader(header).payload as ExactEIP3009Payload;
  return {
    from: authorization.from as Address,
    to: authorization.to as Address,
    value: BigInt(authorization.value),
    validAfter: BigInt(authorization.validAfter),
    validBefore: BigInt(authorization.validBefore),
    nonce: authorization.nonce as Hex,
  };
}

/**
 * The payer's authorization sent to the token by another sender than the gateway's relayer: anyone
 * holding a signed authorization can send it, the deployer does here (so a `ReceiveWithAuthorization`
 * must pay the deployer), or `sender`. With `gas`, it is sent without an estimate, so one that
 * reverts is mined too. Resolves with the transaction's hash once it is mined.
 */
export async function landTransfer(
  local: LocalChain,
  payer: PrivateKeyAccount,
  authorization: TransferAuthorization,
  options: {
    gas?: bigint;
    primaryType?: 'TransferWithAuthorization' | 'ReceiveWithAuthorization';
    sender?: LocalChain['deployer'];
  } = {},
): Promise<Hash> {
  const { primaryType = 'TransferWithAuthorization', gas, sender = local.deployer } = options;
  const signature = await signTransferAuthorization(local, payer, authorization, primaryType);
  const { from, to, value, validAfter, validBefore, nonce } = authorization;
  const hash = await sender.writeContract({
    address: local.usdc,
    abi: testUsdcAbi,
    functionName:
      primaryType === 'ReceiveWithAuthorization' ? 'receiveWithAuthorization' : 'transferWithAuthorization',
    args: [from, to, value, validAfter, validBefore, nonce, ...splitSignature(signature)],
    gas,
  });
  await local.publicClient.waitForTransactionReceipt({ hash });
  return hash;
}

const transferEvent = parseAbiItem('event Transfer(address indexed from, address indexed to, uint256 value)');

/** The payer's USDC transfers to the treasury, as the chain logged them. */
export async function paymentsOf(stack: X402Stack, payer: Address): Promise<bigint[]> {
  const logs = await stack.local.publicClient.getLogs({
    address: stack.local.usdc,
    event: transferEvent,
    args: { from: payer, to: stack.local.accounts.treasury.address },
    fromBlock: 0n,
  });
  return logs.map((log) => log.args.value as bigint);
}

/** The client's error for a request the gateway refused; fails if it was served. */
export function refused(promise: Promise<unknown>): Promise<APIError> {
  return promise.then(
    () => {
      throw new Error('the request was served');
    },
    (error: unknown) => {
      if (!(error instanceof APIError)) throw error;
      return error;
    },
  );
}
