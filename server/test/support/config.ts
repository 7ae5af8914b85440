import type { GatewayConfig } from '../../src/config.js';
import { TEST_MODELS_FILE } from './catalog.js';

/** A complete config for tests; chain values point nowhere unless a test gives real ones. */
export function testConfig(overrides: Partial<GatewayConfig> = {}): GatewayConfig {
  const base: GatewayConfig = {
    port: 0,
    host: '127.0.0.1',
    databaseUrl: ':memory:',
    jwtSecret: 'test-secret-test-secret-test-secret!',
    logLevel: 'silent',
    providers: {
      anthropic: { apiKey: 'sk-ant-test', baseUrl: 'http://127.0.0.1:9' },
      google: { apiKey: 'gemini-test', baseUrl: 'http://127.0.0.1:9' },
    },
    // The shipped models and the earlier ones the payment suites' amounts are computed at.
    modelsFile: TEST_MODELS_FILE,
    defaultModel: 'anthropic/claude-sonnet-4.5',
    commissionBps: 1000,
    settleOnCompletion: false,
    // The defaults: 0.10 USD per unproven payer, 10 USD per hour for all of them, a local block.
    exposure: {
      unprovenPayerMaxAtomic: 100_000n,
      unprovenHourlyMaxPicoUsd: 10_000_000_000_000n,
      balanceMaxAgeMs: 200,
      minSettlementPicoUsd: 0n,
    },
    chain: {
      rpcUrl: 'http://127.0.0.1:9',
      chainId: 31337,
      usdcAddress: '0x0000000000000000000000000000000000000001',
      treasuryAddress: '0x0000000000000000000000000000000000000002',
      sessionKeyPrivateKey: '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d',
      pollIntervalMs: 10,
      // Placeholders: tests that use a chain pass its real environment.
      delegationEnvironment: {
        DelegationManager: '0x0000000000000000000000000000000000000d01',
        EntryPoint: '0x0000000000000000000000000000000000000d02',
        SimpleFactory: '0x0000000000000000000000000000000000000d03',
        implementations: {},
        caveatEnforcers: {
          ERC20TransferAmountEnforcer: '0x0000000000000000000000000000000000000e01',
          ERC20PeriodTransferEnforcer: '0x0000000000000000000000000000000000000e02',
          AllowedCalldataEnforcer: '0x0000000000000000000000000000000000000e03',
          TimestampEnforcer: '0x0000000000000000000000000000000000000e04',
          RedeemerEnforcer: '0x0000000000000000000000000000000000000e05',
          ValueLteEnforcer: '0x0000000000000000000000000000000000000e06',
          NonceEnforcer: '0x0000000000000000000000000000000000000e07',
        },
      },
    },
    limits: {
      bodyLimitBytes: 64 * 1024,
      rateLimitMax: 1000,
      rateLimitWindowMs: 60_000,
      routeRateLimits: {},
      maxInFlightPerPayer: 4,
      upstreamTimeoutMs: 5_000,
      upstreamCompletionTimeoutMs: 5_000,
      upstreamConnectTimeoutMs: 5_000,
      streamHeartbeatMs: 15_000,
      shutdownTimeoutMs: 25_000,
      streamBufferBudgetBytes: 64 * 1024 * 1024,
      collectorIdleMs: 60_000,
      collectorIntervalMs: 30_000,
      collectorBatchSize: 100,
      settlementTimeoutMs: 30_000,
      settlementBatchWaitMs: 3_000,
      sessionMaxLifetimeSeconds: 30 * 86_400,
      sessionMinCapAtomic: 10_000n,
    },
  };
  return { ...base, ...overrides, limits: { ...base.limits, ...overrides.limits } };
}
