import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { privateKeyToAddress } from 'viem/accounts';
import { buildApp } from '../../src/app.js';
import type { GatewayConfig } from '../../src/config.js';
import { createLocalChain, type LocalChain } from '../chain/index.js';
import { startFaucet } from '../faucet.js';
import { writeLocalCatalog } from './catalog.js';
import { type LocalStackFacts, removeStackFacts, writeStackFacts } from './facts.js';
import { localGatewayConfig, simulatedProviders } from './gateway-config.js';
import { defaultDataDir, stackFactsPath } from './paths.js';
import { startProviderSimulators } from './simulators.js';
import { fundTestOwners } from './test-owners.js';

export interface LocalStackOptions {
  /** The gateway's port: default 8080; 0 picks a free one. */
  port?: number;
  /** The gateway's interface. Default 127.0.0.1. */
  host?: string;
  /** anvil's port. Default: a free one. */
  rpcPort?: number;
  /** The faucet's port. Default: a free one. */
  faucetPort?: number;
  /** Holds the SQLite file and `local-stack.json`. Default `<repo>/data`. */
  dataDir?: string;
  /** Use a new temporary data directory instead, deleted by `stop()` (tests, e2e, benchmarks). */
  tempDataDir?: boolean;
  /** The gateway's log level. Default `silent`. */
  logLevel?: string;
  /** How many test owners get a deployed, funded smart account (at most 7). Default 3. */
  testOwners?: number;
  /** USDC atomic units minted to each test owner and to its smart account. Default 1000 USDC. */
  testOwnerUsdc?: bigint;
  /** Seconds between blocks. Default 0.2. */
  blockTime?: number;
  /**
   * Gateway variables the stack leaves open (RATE_LIMITS, COMMISSION_BPS, ...). A provider family's API key or base
   * URL among them replaces its simulator. Default none: not process.env.
   */
  env?: Record<string, string | undefined>;
  /** The last word on the gateway's config (`chain` and `limits` are merged field by field). */
  gateway?: Partial<GatewayConfig>;
}

/** A running local stack: its facts, the live parts (for tests), and `stop()`. */
export interface LocalStack extends LocalStackFacts {
  dataDir: string;
  /** `<dataDir>/local-stack.json`, removed again by `stop()`. */
  factsPath: string;
  config: GatewayConfig;
  /** The chain with its clients: balances, minting, cheat codes. */
  chain: LocalChain;
  app: FastifyInstance;
  /** Stops the gateway, faucet, simulators and anvil (in that order), and deletes a temporary data directory. */
  stop(): Promise<void>;
}

const DEFAULT_TEST_OWNERS = 3;
const DEFAULT_TEST_OWNER_USDC = 1_000_000_000n;

/**
 * Starts anvil with the contracts, the provider simulators, the dev faucet and the gateway, funds the test owners
 * and writes `local-stack.json`. The chain is new at every start, so the stack's database starts empty too.
 */
export async function startLocalStack(options: LocalStackOptions = {}): Promise<LocalStack> {
  const stops: Array<() => Promise<void>> = [];
  const stopAll = async () => {
    const failures: unknown[] = [];
    for (const stop of stops.splice(0).reverse())
      await stop().catch((error: unknown) => failures.push(error));
    if (failures.length > 0) throw new AggregateError(failures, 'the local stack did not stop cleanly');
  };
  try {
    const dataDir = await prepareDataDir(options, stops);
    const databaseUrl = join(dataDir, 'local-stack.sqlite');
    await removeDatabase(databaseUrl);

    const [chain, simulators] = await allStarted([
      track(stops, createLocalChain({ port: options.rpcPort, blockTime: options.blockTime }), (c) =>
        c.stop(),
      ),
      track(stops, startProviderSimulators(), (s) => s.close()),
    ]);
    const environmentFile = join(dataDir, 'local-chain-environment.json');
    await writeFile(environmentFile, `${JSON.stringify({ environment: chain.environment }, null, 2)}\n`);
    const operatorCatalog = options.env?.MODELS_FILE || options.gateway?.modelsFile;
    const modelsFile = operatorCatalog ? undefined : await writeLocalCatalog(dataDir, simulators.openai);
    const faucet = await track(stops, startFaucet(chain, { port: options.faucetPort }), (f) => f.close());
    const simulated = simulatedProviders(options.env ?? {});
    const config = localGatewayConfig(
      {
        chain,
        simulators: {
          anthropic: simulated.anthropic ? simulators.anthropic : undefined,
          gemini: simulated.gemini ? simulators.gemini : undefined,
        },
        databaseUrl,
        port: options.port ?? 8080,
        host: options.host ?? '127.0.0.1',
        logLevel: options.logLevel ?? 'silent',
        faucetUrl: faucet.url,
        environmentFile,
        modelsFile,
      },
      options.env,
      options.gateway,
    );
    const [testOwners, app] = await allStarted([
      fundTestOwners(
        chain,
        options.testOwners ?? DEFAULT_TEST_OWNERS,
        options.testOwnerUsdc ?? DEFAULT_TEST_OWNER_USDC,
      ),
      track(stops, buildApp(config), (a) => a.close()),
    ]);
    await app.listen({ port: config.port, host: config.host });
    const gatewayUrl = `http://${loopbackFor(config.host)}:${(app.server.address() as { port: number }).port}`;

    const facts: LocalStackFacts = {
      gatewayUrl,
      dashboardUrl: config.webDir ? `${gatewayUrl}/` : null,
      graphqlUrl: `${gatewayUrl}/graphql`,
      rpcUrl: chain.rpcUrl,
      chainId: chain.chainId,
      usdc: chain.usdc,
      delegationManager: chain.environment.DelegationManager,
      environment: chain.environment,
      treasury: config.chain.treasuryAddress,
      sessionKeyAddress: privateKeyToAddress(config.chain.sessionKeyPrivateKey),
      faucetUrl: faucet.url,
      simulators: { anthropic: simulators.anthropic, gemini: simulators.gemini, openai: simulators.openai },
      providers: {
        anthropic: { baseUrl: config.providers.anthropic.baseUrl, simulated: simulated.anthropic },
        gemini: { baseUrl: config.providers.google.baseUrl, simulated: simulated.gemini },
      },
      testOwners,
      pid: process.pid,
      anvilPid: chain.pid,
      databaseUrl,
      startedAt: new Date().toISOString(),
    };
    const factsPath = stackFactsPath(dataDir);
    await writeStackFacts(factsPath, facts);
    stops.push(() => removeStackFacts(factsPath, facts));

    let stopping: Promise<void> | undefined;
    return {
      ...facts,
      dataDir,
      factsPath,
      config,
      chain,
      app,
      stop: () => {
        stopping ??= stopAll();
        return stopping;
      },
    };
  } catch (error) {
    await stopAll().catch(() => undefined);
    throw error;
  }
}

/** Like Promise.all, but settles only once every part has started or failed, so none starts after a clean-up. */
async function allStarted<T extends readonly unknown[]>(
  parts: { [K in keyof T]: Promise<T[K]> },
): Promise<T> {
  const results = await Promise.allSettled(parts);
  const failed = results.find((result) => result.status === 'rejected');
  if (failed) throw failed.reason;
  return results.map((result) => (result as PromiseFulfilledResult<unknown>).value) as unknown as T;
}

/** Awaits a part and registers how to stop it, so a failure later in start-up stops it again. */
async function track<T>(
  stops: Array<() => Promise<void>>,
  starting: Promise<T>,
  stop: (part: T) => Promise<void>,
): Promise<T> {
  const part = await starting;
  stops.push(() => stop(part));
  return part;
}

async function prepareDataDir(
  options: LocalStackOptions,
  stops: Array<() => Promise<void>>,
): Promise<string> {
  if (options.tempDataDir) {
    const dir = await mkdtemp(join(tmpdir(), 'paygate-stack-'));
    stops.push(() => rm(dir, { recursive: true, force: true }));
    return dir;
  }
  const dir = options.dataDir ?? defaultDataDir;
  await mkdir(dir, { recursive: true });
  return dir;
}

/** A ledger of an earlier chain would point at transactions that no longer exist. */
async function removeDatabase(path: string): Promise<void> {
  await Promise.all(
    ['', '-wal', '-shm', '-journal'].map((suffix) => rm(`${path}${suffix}`, { force: true })),
  );
}

function loopbackFor(host: string): string {
  if (host === '0.0.0.0' || host === '::' || host === '') return '127.0.0.1';
  return host.includes(':') ? `[${host}]` : host;
}
