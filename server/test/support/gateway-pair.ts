import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { type Address, type Hex, toHex } from 'viem';
import { afterAll, beforeAll } from 'vitest';
import {
  createLocalChain,
  createPayerAccount,
  type LocalChain,
  type PayerAccount,
} from '../../devkit/chain/index.js';
import { type AnthropicStep, startAnthropicSimulator } from '../../devkit/simulators/anthropic.js';
import type { Simulator } from '../../devkit/simulators/simulator-server.js';
import { authorizeWithSmartAccount } from '../../src/client/index.js';
import type { GatewayConfig } from '../../src/config.js';
import type { Store } from '../../src/store/database.js';
import { chainGatewayConfig } from './chain-gateway.js';
import { createTestDatabase, type TestDatabase } from './db.js';
import { type GatewayProcess, gatewayEnvironment, startGatewayProcess } from './gateway-process.js';
import { type OrderingProbe, startOrderingProbe } from './ordering-probe.js';

/** Whether this machine offers what several instances share: DATABASE_URL naming PostgreSQL, and REDIS_URL. */
export const sharedStoresConfigured = Boolean(
  process.env.DATABASE_URL?.startsWith('postgres') && process.env.REDIS_URL,
);

/** A session payer of the pair: a fresh smart account, its session authorized through A. */
export interface PairSessionPayer {
  payer: PayerAccount;
  address: Address;
  /** An OpenAI client on each of the gateways asked for, in their order. */
  clients: OpenAI[];
  clientOf(gateway: GatewayProcess): OpenAI;
}

/**
 * Two gateway processes (`src/main.ts` each) sharing a PostgreSQL schema of their own and the
 * machine's Redis, as instances behind a load balancer do, on a local chain, calling the Anthropic
 * simulator through an ordering probe. Set once the suite's `beforeAll` ran.
 */
export interface GatewayPair {
  local: LocalChain;
  anthropic: Simulator<AnthropicStep>;
  store: Store;
  probe: OrderingProbe;
  /** The processes' environment. */
  env: Record<string, string>;
  /** A and B; a test that restarts one puts the new process in its place. */
  instances: GatewayProcess[];
  /** Starts another process (of `env` unless told otherwise), stopped with the suite. */
  start(environment?: Record<string, string>): Promise<GatewayProcess>;
  /** Its own address, so that no other suite shares its Redis keys. Sessions last an hour unless told. */
  sessionPayer(
    owner: number,
    options?: { gateways?: GatewayProcess[]; expiresAt?: Date },
  ): Promise<PairSessionPayer>;
}

/** Registers the suite's `beforeAll` and `afterAll` that start and stop the pair, with `limits`. */
export function useGatewayPair(limits: Partial<GatewayConfig['limits']>): GatewayPair {
  const pair = { instances: [] as GatewayProcess[] } as GatewayPair;
  let database: TestDatabase | undefined;
  let dir: string | undefined;
  const started: GatewayProcess[] = [];

  pair.start = async (environment = pair.env) => {
    const instance = await startGatewayProcess(environment);
    started.push(instance);
    return instance;
  };

  pair.sessionPayer = async (owner, options = {}) => {
    const { gateways = pair.instances, expiresAt = new Date(Date.now() + 3_600_000) } = options;
    const { local, instances } = pair;
    const payer = await createPayerAccount(local, local.accounts.payers[owner]!.privateKey, {
      fundUsdc: 10_000_000n,
      deploySalt: toHex(randomBytes(32)) as Hex,
    });
    const session = await authorizeWithSmartAccount({
      gatewayUrl: instances[0]!.url,
      smartAccount: payer.account,
      cap: 5_000_000n,
      expiresAt,
    });
    const clientOf = (gateway: GatewayProcess) =>
      new OpenAI({ baseURL: `${gateway.url}/v1`, apiKey: session.token, maxRetries: 0 });
    return { payer, address: payer.address, clients: gateways.map(clientOf), clientOf };
  };

  beforeAll(async () => {
    [pair.local, pair.anthropic, database] = await Promise.all([
      createLocalChain(),
      startAnthropicSimulator(),
      createTestDatabase('postgres'),
    ]);
    pair.store = await database.open();
    pair.probe = await startOrderingProbe({
      upstreamUrl: pair.anthropic.url,
      store: pair.store,
      publicClient: pair.local.publicClient,
    });
    const base = chainGatewayConfig(pair.local, pair.anthropic, { databaseUrl: database.url, limits });
    const config: GatewayConfig = {
      ...base,
      redisUrl: process.env.REDIS_URL,
      // The suites hammer fresh payers at once: the bound on payers that never paid is not their subject.
      exposure: { ...base.exposure, unprovenPayerMaxAtomic: 10_000_000n },
      providers: { ...base.providers, anthropic: { ...base.providers.anthropic, baseUrl: pair.probe.url } },
    };
    dir = mkdtempSync(join(tmpdir(), 'paygate-pair-'));
    pair.env = gatewayEnvironment(config, dir);
    pair.instances.push(...(await Promise.all([pair.start(), pair.start()])));
  });

  afterAll(async () => {
    await Promise.all(started.map((instance) => instance.stop()));
    await pair.probe?.close();
    await Promise.all([pair.anthropic?.close(), pair.local?.stop()]);
    await database?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  return pair;
}
