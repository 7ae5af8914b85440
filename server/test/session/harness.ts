import OpenAI from 'openai';
import type { Address, Hex } from 'viem';
import { afterAll, beforeAll, onTestFinished } from 'vitest';
import {
  createLocalChain,
  createPayerAccount,
  type LocalChain,
  type PayerAccount,
} from '../../devkit/chain/index.js';
import { type AnthropicStep, startAnthropicSimulator } from '../../devkit/simulators/anthropic.js';
import type { Simulator } from '../../devkit/simulators/simulator-server.js';
import { type AuthorizedSession, authorizeWithSmartAccount } from '../../src/client/index.js';
import type { GatewayConfig, LimitsConfig } from '../../src/config.js';
import {
  chainGatewayConfig,
  type GatewayUnderTest,
  startGateway,
  temporaryDatabase,
} from '../support/chain-gateway.js';

export { type GatewayUnderTest, startGateway, temporaryDatabase } from '../support/chain-gateway.js';
export type { AnthropicStep, Simulator };
export { startAnthropicSimulator };

export const MODEL = 'anthropic/claude-sonnet-4.5';
/**
 * At $3 / $15 per million tokens plus 10% commission: 10 input and 2 output tokens cost exactly
 * 66 USDC atomic units; 1 input token costs 3.3 units (3_300_000 pico-USD), which leaves carries.
 */
export const SMALL = { input_tokens: 10, output_tokens: 2 } as const;
export const SMALL_COST_ATOMIC = 66n;
export const ODD = { input_tokens: 1, output_tokens: 0 } as const;
export const ODD_COST_PICO = 3_300_000n;

/** What a session test file runs against: a local chain, the Anthropic simulator, a database file. */
export interface SessionStack {
  local: LocalChain;
  anthropic: Simulator<AnthropicStep>;
  database: ReturnType<typeof temporaryDatabase>;
}

/**
 * Starts the stack before the file's tests and hands it to `use` (which starts the file's gateways);
 * stops it after the file's own `afterAll` hooks (Vitest runs those in reverse order), so after its
 * gateways.
 */
export function withSessionStack(use: (stack: SessionStack) => Promise<void>): void {
  let stack: Partial<SessionStack> = {};
  beforeAll(async () => {
    const [local, anthropic] = await Promise.all([createLocalChain(), startAnthropicSimulator()]);
    stack = { local, anthropic, database: temporaryDatabase() };
    await use(stack as SessionStack);
  });
  afterAll(async () => {
    await Promise.all([stack.anthropic?.close(), stack.local?.stop()]);
    stack.database?.remove();
  });
}

/**
 * The gateway's config for the local chain; debts are left to requests unless a test asks for the
 * collector: it runs once at start-up, then hourly, and collects only debts idle an hour or of
 * sessions ending within two.
 */
export function sessionGatewayConfig(
  local: LocalChain,
  anthropic: Simulator<AnthropicStep>,
  options: { databaseUrl: string; limits?: Partial<LimitsConfig> },
): GatewayConfig {
  return chainGatewayConfig(local, anthropic, {
    databaseUrl: options.databaseUrl,
    limits: {
      collectorIdleMs: 3_600_000,
      collectorIntervalMs: 3_600_000,
      sessionMinCapAtomic: 1n,
      ...options.limits,
    },
  });
}

/** A session stack with the file's gateway on its database; `treasury` is what settlements pay. */
export interface SessionGateway extends SessionStack {
  gateway: GatewayUnderTest;
  treasury: Address;
}

/**
 * Starts the stack and a gateway of `sessionGatewayConfig` before the file's tests, and stops them
 * after the file's own `afterAll` hooks; the fields are set once `beforeAll` ran. `config` edits the
 * gateway's config (it may start what the gateway is to reach); `parts` are `startGateway`'s.
 */
export function useSessionGateway(
  options: {
    limits?: Partial<LimitsConfig>;
    config?: (config: GatewayConfig, stack: SessionStack) => GatewayConfig | Promise<GatewayConfig>;
    parts?: Parameters<typeof startGateway>[1];
  } = {},
): SessionGateway {
  const stack = {} as SessionGateway;
  withSessionStack(async (started) => {
    Object.assign(stack, started, { treasury: started.local.accounts.treasury.address });
    const config = sessionGatewayConfig(started.local, started.anthropic, {
      databaseUrl: started.database.url,
      limits: options.limits,
    });
    stack.gateway = await startGateway((await options.config?.(config, started)) ?? config, options.parts);
  });
  afterAll(() => stack.gateway?.close());
  return stack;
}

/** A gateway on a database of its own (its collector runs at start-up only), stopped when the test ends. */
export async function startOwnGateway({
  local,
  anthropic,
}: Pick<SessionStack, 'local' | 'anthropic'>): Promise<GatewayUnderTest> {
  const database = temporaryDatabase();
  const gateway = await startGateway(sessionGatewayConfig(local, anthropic, { databaseUrl: database.url }));
  onTestFinished(async () => {
    await gateway.close();
    database.remove();
  });
  return gateway;
}

/** A funded, deployed payer smart account; `salt` gives one owner several accounts. */
export function newPayer(
  local: LocalChain,
  owner: number,
  options: { fundUsdc?: bigint; salt?: number; deploy?: boolean; passkeys?: number } = {},
): Promise<PayerAccount> {
  const key = local.accounts.payers[owner]?.privateKey;
  if (!key) throw new Error(`no payer key ${owner}`);
  return createPayerAccount(local, key, {
    fundUsdc: options.fundUsdc ?? 10_000_000n,
    deploySalt: `0x${(options.salt ?? 0).toString(16).padStart(2, '0')}` as Hex,
    deploy: options.deploy,
    passkeys: options.passkeys,
  });
}

/** A session for the payer through the client helper, as a dashboard or script would get it. */
export function authorize(
  gateway: Pick<GatewayUnderTest, 'url'>,
  payer: PayerAccount,
  options: { cap?: bigint; expiresInSeconds?: number; period?: { seconds: number; startsAt?: Date } } = {},
): Promise<AuthorizedSession> {
  return authorizeWithSmartAccount({
    gatewayUrl: gateway.url,
    smartAccount: payer.account,
    cap: options.cap ?? 5_000_000n,
    period: options.period,
    expiresAt: new Date(Date.now() + (options.expiresInSeconds ?? 86_400) * 1000),
  });
}

/** The official client with the session's token as its API key; `raw` responses keep the headers. */
export function openaiFor(gateway: Pick<GatewayUnderTest, 'url'>, token: string): OpenAI {
  return new OpenAI({ baseURL: `${gateway.url}/v1`, apiKey: token, maxRetries: 0 });
}

/** One chat completion, its HTTP response kept for the headers. */
export async function chat(client: OpenAI, content = 'hello') {
  const { data, response } = await client.chat.completions
    .create({ model: MODEL, messages: [{ role: 'user', content }], max_tokens: 64 })
    .withResponse();
  return { completion: data, headers: response.headers, status: response.status };
}
