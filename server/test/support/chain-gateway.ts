import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll } from 'vitest';
import { createLocalChain, type LocalChain } from '../../devkit/chain/index.js';
import type { AnthropicStep } from '../../devkit/simulators/anthropic.js';
import { startAnthropicSimulator } from '../../devkit/simulators/index.js';
import type { Simulator } from '../../devkit/simulators/simulator-server.js';
import { buildApp, type GatewayParts } from '../../src/app.js';
import type { GatewayConfig, LimitsConfig } from '../../src/config.js';
import { openStore, type Store } from '../../src/store/database.js';
import { testConfig } from './config.js';
import { createTestDatabase, type TestDatabase } from './db.js';

/** A SQLite file in a fresh directory (a restart can reopen it), removed by `remove`. */
export function temporaryDatabase() {
  const dir = mkdtempSync(join(tmpdir(), 'paygate-'));
  return { url: join(dir, 'gateway.sqlite'), remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** The gateway's config for a local chain from the kit, its Anthropic models served by the simulator. */
export function chainGatewayConfig(
  local: LocalChain,
  anthropic: Simulator<AnthropicStep>,
  options: { databaseUrl: string; facilitatorUrl?: string; limits?: Partial<LimitsConfig> },
): GatewayConfig {
  const base = testConfig();
  return testConfig({
    databaseUrl: options.databaseUrl,
    providers: { ...base.providers, anthropic: { apiKey: 'sk-ant-test', baseUrl: anthropic.url } },
    chain: {
      rpcUrl: local.rpcUrl,
      chainId: local.chainId,
      usdcAddress: local.usdc,
      treasuryAddress: local.accounts.treasury.address,
      sessionKeyPrivateKey: local.accounts.gateway.privateKey,
      delegationEnvironment: local.environment,
      facilitatorUrl: options.facilitatorUrl,
      pollIntervalMs: base.chain.pollIntervalMs,
    },
    limits: { ...base.limits, ...options.limits },
  });
}

export interface GatewayUnderTest {
  url: string;
  app: FastifyInstance;
  /** The gateway's ledger, kept by the test for its assertions. */
  store: Store;
  config: GatewayConfig;
  close(): Promise<void>;
}

/**
 * The whole gateway as `buildApp` wires it, listening on 127.0.0.1 with a free port. `parts`
 * replaces some of its parts; by default /health probes nothing (pass `{}` for the real checks).
 */
export async function startGateway(
  config: GatewayConfig,
  parts: Omit<Partial<GatewayParts>, 'store'> = { checks: [] },
): Promise<GatewayUnderTest> {
  const store = openStore(config.databaseUrl);
  const app = await buildApp(config, { ...parts, store });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return {
    url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`,
    app,
    store,
    config,
    async close() {
      await app.close();
      await store.close();
    },
  };
}

export interface TwoInstances {
  local: LocalChain;
  anthropic: Simulator<AnthropicStep>;
  instances: [GatewayUnderTest, GatewayUnderTest];
}

/**
 * Two gateway instances on one fresh PostgreSQL schema, one local chain and one simulator, started
 * before the suite's tests and stopped after them. Call inside a `describe`; read the result in tests.
 */
export function useTwoInstancesOnPostgres(
  configFor: (local: LocalChain, anthropic: Simulator<AnthropicStep>, databaseUrl: string) => GatewayConfig,
): TwoInstances {
  const shared = {} as TwoInstances;
  let database: TestDatabase | undefined;
  beforeAll(async () => {
    [shared.local, shared.anthropic, database] = await Promise.all([
      createLocalChain(),
      startAnthropicSimulator(),
      createTestDatabase('postgres'),
    ]);
    const config = configFor(shared.local, shared.anthropic, database.url);
    shared.instances = [await startGateway(config), await startGateway(config)];
  });
  afterAll(async () => {
    await Promise.all(shared.instances?.map((gateway) => gateway.close()) ?? []);
    await Promise.all([shared.anthropic?.close(), shared.local?.stop(), database?.drop()]);
  });
  return shared;
}
