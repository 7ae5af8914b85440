import { x402Client } from '@x402/core/client';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader } from '@x402/core/http';
import type { PaymentRequired, SettleResponse } from '@x402/core/types';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { wrapFetchWithPayment } from '@x402/fetch';
import OpenAI from 'openai';
import type { Address, Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll } from 'vitest';
import { createLocalChain, type LocalChain, mintUsdc, type PayerAccount } from '../../devkit/chain/index.js';
import { type FacilitatorServer, startFacilitatorServer } from '../../devkit/facilitator.js';
import { type AnthropicStep, startAnthropicSimulator } from '../../devkit/simulators/anthropic.js';
import type { Simulator } from '../../devkit/simulators/simulator-server.js';
import type { LimitsConfig } from '../../src/config.js';
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
}

/**
 * Starts the stack before the file's tests and stops it after them; the fields are set once
 * `beforeAll` ran. With `remoteFacilitator`, the gateway settles through a facilitator server that
 * sends from the last payer key (tests leave that one to it).
 */
export function useX402Stack(
  options: { remoteFacilitator?: boolean; limits?: Partial<LimitsConfig> } = {},
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
    stack.gateway = await startGateway(
      chainGatewayConfig(stack.local, stack.anthropic, {
        databaseUrl: database.url,
        facilitatorUrl: stack.facilitator?.url,
        limits: options.limits,
      }),
    );
  });
  afterAll(async () => {
    await stack.gateway?.close();
    await Promise.all([stack.facilitator?.close(), stack.anthropic?.close(), stack.local?.stop()]);
    database.remove();
  });
  return stack;
}

/** An EOA payer (a chain kit payer key) holding `usdc` atomic units more. */
export async function fundedEoa(stack: X402Stack, index: number, usdc = 10_000_000n) {
  const account = privateKeyToAccount(stack.local.accounts.payers[index]!.privateKey);
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
