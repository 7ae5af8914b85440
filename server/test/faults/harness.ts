import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import OpenAI from 'openai';
import { type Address, type Hex, toHex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, expect } from 'vitest';
import { type AnvilProcess, rpc, startAnvil } from '../../devkit/chain/anvil.js';
import {
  createLocalChain,
  createPayerAccount,
  type LocalChain,
  mintUsdc,
  usdcBalance,
} from '../../devkit/chain/index.js';
import { type AnthropicStep, startAnthropicSimulator } from '../../devkit/simulators/anthropic.js';
import type { Simulator } from '../../devkit/simulators/simulator-server.js';
import { settlementsOf } from '../../src/billing/settlements.js';
import { authorizeWithSmartAccount } from '../../src/client/index.js';
import type { GatewayConfig, LimitsConfig } from '../../src/config.js';
import type { LedgerReconciliation } from '../../src/payments/outbox/reconcile-ledger.js';
import { openStore, type Store } from '../../src/store/database.js';
import { migrateToLatest } from '../../src/store/migrate.js';
import { chainGatewayConfig } from '../support/chain-gateway.js';
import { type GatewayProcess, gatewayEnvironment, startGatewayProcess } from '../support/gateway-process.js';
import { confirmedAmount, reconcileWithChain } from '../support/ledger-checks.js';
import { type OrderingProbe, type ProbedAnswer, startOrderingProbe } from '../support/ordering-probe.js';
import { openaiClient, payingClient, payingFetch } from '../x402/harness.js';
import { type RpcProxy, startRpcProxy } from './rpc-proxy.js';

/**
 * A gateway process on a local chain (through an RPC proxy the test can fail), its provider behind
 * the ordering probe, its ledger (a SQLite file unless a suite gives another database) open in the
 * test too. The fields are set once `beforeAll` ran.
 */
export interface FaultStack {
  local: LocalChain;
  anthropic: Simulator<AnthropicStep>;
  probe: OrderingProbe;
  rpc: RpcProxy;
  /** The gateway's ledger, read by the test. */
  store: Store;
  /** The running gateway; replaced by `restart`. */
  gateway: GatewayProcess;
  /** The environment the gateway runs with. */
  env: Record<string, string>;
  /** Starts the gateway again (after a kill or a stop), with the same environment. */
  restart(): Promise<GatewayProcess>;
  /**
   * Stops anvil and starts it again on the same port from the state it had (what is mined):
   * transactions waiting in its pool are lost, as in a node restart.
   */
  restartChain(): Promise<void>;
  /**
   * A fresh smart account with a session; `client()` speaks to the gateway running now. With
   * `deployed: false` it signs before it exists (ERC-6492) and the gateway deploys it.
   */
  sessionPayer(owner: number, options?: { deployed?: boolean }): Promise<Payer>;
  /** A session payer whose one answered request (`SMALL_USAGE`) is owed. */
  owingPayer(owner: number, options?: { deployed?: boolean }): Promise<Payer>;
  /**
   * An EOA of a fresh key holding `PAYER_FUNDS`, paying by x402 with the stock client, whose one
   * answered request (`SMALL_USAGE`) is owed.
   */
  owingX402Payer(): Promise<Payer>;
  /**
   * The payer's request while a dependency is cut (`cut`, undone by `restore` either way): refused
   * as `expected` (`<status> <code>`), nothing forwarded. Resolves with the refusal.
   */
  refusedWhileCut(
    payer: Payer,
    dependency: { cut(): void; restore(): void },
    expected: string,
  ): Promise<ProbedAnswer>;
  /**
   * The payer's next request is served once its debt (`SMALL_COST`) is paid: nothing was forwarded
   * unpaid, and the ledger matches the chain.
   */
  servedPayingDebt(payer: Payer): Promise<ProbedAnswer>;
  /** The payer's settlements, newest first, as `<status> <amount>`. */
  settlementStates(payer: Address): Promise<string[]>;
  /** The ledger against the chain, and each payer's USDC against its confirmed settlements. */
  expectLedgerMatchesChain(payers: Address[]): Promise<LedgerReconciliation>;
}

/** A payer and an OpenAI client that pays as it does (its session's token, or x402 proofs). */
export interface Payer {
  address: Address;
  client(): OpenAI;
}

export interface FaultStackOptions {
  /** A database URL shared with the test (PostgreSQL); a SQLite file of the suite's own otherwise. */
  databaseUrl?: () => string;
  /** The URLs the gateway uses for its database and Redis when they differ from the test's (proxies). */
  gatewayDatabaseUrl?: () => string;
  redisUrl?: () => string | undefined;
  limits?: Partial<LimitsConfig>;
}

/** A request's usage as the provider reports it, and what it costs in USDC atomic units ($3 / $15 per million tokens plus 10%). */
export const SMALL_USAGE = { input_tokens: 10, output_tokens: 2 };
export const SMALL_COST = 66n;

/** USDC atomic units each payer starts with. */
export const PAYER_FUNDS = 10_000_000n;

/** Settlements fail fast, idle debts are left alone: each test settles by its own requests. */
export const FAULT_LIMITS: Partial<LimitsConfig> = {
  sessionMinCapAtomic: 1n,
  upstreamTimeoutMs: 1_000,
  settlementTimeoutMs: 3_000,
  collectorIdleMs: 3_600_000,
  collectorIntervalMs: 60_000,
};

export function useFaultStack(options: FaultStackOptions = {}): FaultStack {
  const stack = {} as FaultStack;
  const dir = mkdtempSync(join(tmpdir(), 'paygate-faults-'));
  beforeAll(async () => {
    [stack.local, stack.anthropic] = await Promise.all([createLocalChain(), startAnthropicSimulator()]);
    stack.rpc = await startRpcProxy(stack.local.rpcUrl);
    const databaseUrl = options.databaseUrl?.() ?? join(dir, 'gateway.sqlite');
    stack.store = openStore(databaseUrl);
    await migrateToLatest(stack.store);
    stack.probe = await startOrderingProbe({
      upstreamUrl: stack.anthropic.url,
      store: stack.store,
      publicClient: stack.local.publicClient,
    });
    const base = chainGatewayConfig(stack.local, stack.anthropic, {
      databaseUrl: options.gatewayDatabaseUrl?.() ?? databaseUrl,
      limits: { ...FAULT_LIMITS, ...options.limits },
    });
    const config: GatewayConfig = {
      ...base,
      redisUrl: options.redisUrl?.(),
      providers: { ...base.providers, anthropic: { ...base.providers.anthropic, baseUrl: stack.probe.url } },
      chain: { ...base.chain, rpcUrl: stack.rpc.url },
    };
    stack.env = gatewayEnvironment(config, dir);
    stack.gateway = await startGatewayProcess(stack.env);
  });
  afterAll(async () => {
    await stack.gateway?.stop();
    await stack.probe?.close();
    await stack.rpc?.close();
    await stack.store?.close();
    await Promise.all([stack.anthropic?.close(), stack.local?.stop(), restartedChain?.stop()]);
    rmSync(dir, { recursive: true, force: true });
  });

  let restartedChain: AnvilProcess | undefined;
  stack.restartChain = async () => {
    const { local } = stack;
    const dump = Buffer.from((await rpc<Hex>(local.rpcUrl, 'anvil_dumpState')).slice(2), 'hex');
    const stateFile = join(dir, 'chain-state.json');
    // anvil_dumpState gzips; --load-state reads plain JSON.
    writeFileSync(stateFile, dump[0] === 0x1f && dump[1] === 0x8b ? gunzipSync(dump) : dump);
    await (restartedChain?.stop() ?? local.stop());
    restartedChain = await startAnvil({ port: Number(new URL(local.rpcUrl).port), loadState: stateFile });
  };

  stack.restart = async () => {
    stack.gateway = await startGatewayProcess(stack.env);
    return stack.gateway;
  };

  stack.sessionPayer = async (owner, options = {}) => {
    const payer = await createPayerAccount(stack.local, stack.local.accounts.payers[owner]!.privateKey, {
      fundUsdc: PAYER_FUNDS,
      deploySalt: toHex(randomBytes(32)) as Hex,
      deploy: options.deployed,
    });
    const session = await authorizeWithSmartAccount({
      gatewayUrl: stack.gateway.url,
      smartAccount: payer.account,
      cap: 5_000_000n,
      expiresAt: new Date(Date.now() + 86_400_000),
    });
    return {
      address: payer.address,
      client: () => new OpenAI({ baseURL: `${stack.gateway.url}/v1`, apiKey: session.token, maxRetries: 0 }),
    };
  };

  const owing = async (payer: Payer) => {
    stack.anthropic.script({ text: 'owed', usage: SMALL_USAGE });
    expect((await stack.probe.chat(payer.client(), payer.address)).status).toBe(200);
    return payer;
  };
  stack.owingPayer = async (owner, options) => owing(await stack.sessionPayer(owner, options));
  stack.owingX402Payer = async () => {
    const account = privateKeyToAccount(generatePrivateKey());
    await mintUsdc(stack.local, account.address, PAYER_FUNDS);
    return owing({
      address: account.address,
      client: () => openaiClient(stack.gateway.url, payingFetch(payingClient(stack.local, account))),
    });
  };

  stack.refusedWhileCut = async (payer, dependency, expected) => {
    const forwarded = stack.probe.forwarded();
    dependency.cut();
    let refused: ProbedAnswer;
    try {
      refused = await stack.probe.chat(payer.client(), payer.address);
    } finally {
      dependency.restore();
    }
    expect(`${refused.status} ${refused.code}`).toBe(expected);
    expect(stack.probe.forwarded()).toBe(forwarded);
    return refused;
  };

  stack.servedPayingDebt = async (payer) => {
    stack.anthropic.script({ text: 'paid', usage: SMALL_USAGE });
    const served = await stack.probe.chat(payer.client(), payer.address);
    expect(`${served.status} ${served.headers.get('x-settlement-amount')}`).toBe(`200 ${SMALL_COST}`);
    expect(stack.probe.violations).toEqual([]);
    await stack.expectLedgerMatchesChain([payer.address]);
    return served;
  };

  stack.settlementStates = async (payer) =>
    (await settlementsOf(stack.store, payer)).map((s) => `${s.status} ${s.amountAtomic}`);

  stack.expectLedgerMatchesChain = async (payers) => {
    for (const payer of payers)
      expect(await usdcBalance(stack.local, payer)).toBe(
        PAYER_FUNDS - (await confirmedAmount(stack.store, payer)),
      );
    const reconciliation = await reconcileWithChain(stack.store, stack.local);
    expect(reconciliation.mismatches).toEqual([]);
    return reconciliation;
  };

  return stack;
}
