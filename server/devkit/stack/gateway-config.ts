import { randomBytes } from 'node:crypto';
import { type GatewayConfig, loadConfig } from '../../src/config.js';
import type { LocalChain } from '../chain/index.js';

/** What the gateway of a local stack is pointed at. */
export interface LocalGatewaySetup {
  chain: LocalChain;
  /** The simulators of the provider families the stack simulates (see `simulatedProviders`). */
  simulators: { anthropic?: string; gemini?: string };
  databaseUrl: string;
  port: number;
  host: string;
  logLevel: string;
  faucetUrl: string;
  /** A JSON file with the chain's Delegation Framework environment (the kit knows no addresses for chain 31337). */
  environmentFile: string;
  modelsFile?: string;
}

type Env = Record<string, string | undefined>;

/** The provider families the stack simulates: those whose API key and base URL are both unset in `env`. */
export function simulatedProviders(env: Env): { anthropic: boolean; gemini: boolean } {
  const unset = (...names: string[]) => names.every((name) => !env[name]?.trim());
  return {
    anthropic: unset('ANTHROPIC_API_KEY', 'ANTHROPIC_BASE_URL'),
    gemini: unset('GEMINI_API_KEY', 'GEMINI_BASE_URL'),
  };
}

/**
 * The gateway's environment for a local stack: the same variables an operator sets (DESIGN.md section 8), so the
 * product's own `loadConfig` checks and completes them. The JWT secret is new at every start, as is the chain.
 */
export function localGatewayEnv(setup: LocalGatewaySetup): Record<string, string> {
  const { chain } = setup;
  const env: Record<string, string> = {
    PORT: String(setup.port),
    HOST: setup.host,
    LOG_LEVEL: setup.logLevel,
    DATABASE_URL: setup.databaseUrl,
    JWT_SECRET: randomBytes(32).toString('hex'),
    // The simulators accept any key (the adapters send one); a real provider's key and URL are the operator's.
    ...(setup.simulators.anthropic && {
      ANTHROPIC_API_KEY: 'sk-ant-local-simulator',
      ANTHROPIC_BASE_URL: setup.simulators.anthropic,
    }),
    ...(setup.simulators.gemini && {
      GEMINI_API_KEY: 'gemini-local-simulator',
      GEMINI_BASE_URL: setup.simulators.gemini,
    }),
    CHAIN_RPC_URL: chain.rpcUrl,
    CHAIN_ID: String(chain.chainId),
    USDC_ADDRESS: chain.usdc,
    TREASURY_ADDRESS: chain.accounts.treasury.address,
    SESSION_KEY_PRIVATE_KEY: chain.accounts.gateway.privateKey,
    DELEGATION_MANAGER_ADDRESS: chain.environment.DelegationManager,
    CHAIN_ENVIRONMENT_FILE: setup.environmentFile,
    DEV_FAUCET_URL: setup.faucetUrl,
  };
  if (setup.modelsFile) env.MODELS_FILE = setup.modelsFile;
  return env;
}

/**
 * The gateway config of a local stack. `baseEnv` supplies what the stack leaves open (rate limits, timeouts, ...);
 * the stack's own variables win, and `overrides` win over both.
 */
export function localGatewayConfig(
  setup: LocalGatewaySetup,
  baseEnv: Env = {},
  overrides: Partial<GatewayConfig> = {},
): GatewayConfig {
  const loaded = loadConfig({ ...baseEnv, ...localGatewayEnv(setup) });
  return {
    ...loaded,
    ...overrides,
    // The local chain's Delegation Framework (an operator would point CHAIN_ENVIRONMENT_FILE at it).
    chain: { ...loaded.chain, delegationEnvironment: setup.chain.environment, ...overrides.chain },
    limits: { ...loaded.limits, ...overrides.limits },
  };
}
