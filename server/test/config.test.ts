import { getAddress } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { describe, expect, test } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.js';

/** The order n of secp256k1: private keys are 1 to n-1. */
const CURVE_ORDER = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
const key = (value: bigint) => `0x${value.toString(16).padStart(64, '0')}`;
const ZERO_ADDRESS = `0x${'0'.repeat(40)}`;

/** The smallest environment the gateway starts with. */
const minimal = {
  JWT_SECRET: 'a'.repeat(32),
  CHAIN_RPC_URL: 'https://mainnet.base.org',
  TREASURY_ADDRESS: '0x00000000000000000000000000000000000000aa',
  SESSION_KEY_PRIVATE_KEY: `0x${'11'.repeat(32)}`,
};

function refusal(env: Record<string, string | undefined>): ConfigError {
  try {
    loadConfig({ ...minimal, ...env });
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error(`accepted ${JSON.stringify(env)}`);
}

describe('loadConfig', () => {
  test('fills every default from a minimal environment', () => {
    const config = loadConfig(minimal);
    expect(config).toMatchObject({
      port: 8080,
      host: '127.0.0.1',
      databaseUrl: './data/gateway.sqlite',
      logLevel: 'info',
      defaultModel: 'anthropic/claude-sonnet-5.5',
      commissionBps: 1000,
      settleOnCompletion: false,
      providers: {
        anthropic: { baseUrl: 'https://api.anthropic.com' },
        google: { baseUrl: 'https://generativelanguage.googleapis.com' },
      },
      chain: {
        chainId: 8453,
        usdcAddress: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
        treasuryAddress: getAddress(minimal.TREASURY_ADDRESS),
        pollIntervalMs: 250,
      },
      limits: {
        // Anthropic's largest request (32 MB), received whole at 140 KB/s.
        bodyLimitBytes: 32 * 1024 * 1024,
        requestTimeoutMs: 240_000,
        databaseQueryTimeoutMs: 60_000,
        rateLimitMax: 600,
        rateLimitWindowMs: 60_000,
        routeRateLimits: {},
        maxInFlightPerPayer: 8,
      },
    });
    expect(config.redisUrl).toBeUndefined();
    expect(config.trustProxy).toBeUndefined();
    expect(config.chain.maxFeePerGasWei).toBeUndefined();
    // A local chain mines every fraction of a second: its blocks are looked for more often.
    expect(
      loadConfig({ ...minimal, CHAIN_ID: '31337', USDC_ADDRESS: minimal.TREASURY_ADDRESS }).chain,
    ).toMatchObject({ pollIntervalMs: 10 });
  });

  test('reads every variable it is given', () => {
    const config = loadConfig({
      ...minimal,
      PORT: '0',
      HOST: '0.0.0.0',
      TRUST_PROXY: '10.0.0.0/8, 192.168.1.1',
      DATABASE_URL: 'postgres://gw@db:5432/gateway',
      REDIS_URL: 'redis://cache:6379',
      ADMIN_TOKEN: 'b'.repeat(16),
      LOG_LEVEL: 'debug',
      ANTHROPIC_API_KEY: 'sk-ant',
      ANTHROPIC_BASE_URL: 'http://127.0.0.1:4010/',
      GEMINI_API_KEY: 'g-key',
      GEMINI_BASE_URL: 'http://127.0.0.1:4011',
      MODELS_FILE: '/etc/paygate/models.json',
      DEFAULT_MODEL: 'google/gemini-3.8-flash',
      COMMISSION_BPS: '0',
      SETTLE_ON_COMPLETION: 'true',
      CHAIN_ID: '31337',
      USDC_ADDRESS: '0x00000000000000000000000000000000000000bb',
      DELEGATION_MANAGER_ADDRESS: '0x00000000000000000000000000000000000000cc',
      FACILITATOR_URL: 'https://x402.example/facilitator',
      CHAIN_POLL_INTERVAL_MS: '40',
      RELAYER_MAX_FEE_PER_GAS_WEI: '50000000000000000000',
      BODY_LIMIT_BYTES: '1024',
      REQUEST_TIMEOUT_MS: '120000',
      DATABASE_QUERY_TIMEOUT_MS: '0',
      RATE_LIMIT_MAX: '10',
      RATE_LIMIT_WINDOW_MS: '1000',
      RATE_LIMITS: ' /v1/chat/completions = 600 ,/v1/models/*=30',
      MAX_IN_FLIGHT_PER_PAYER: '1',
      UPSTREAM_TIMEOUT_MS: '100',
      UPSTREAM_COMPLETION_TIMEOUT_MS: '200',
      STREAM_HEARTBEAT_MS: '5000',
      STREAM_BUFFER_BUDGET_BYTES: '1048576',
      COLLECTOR_IDLE_MS: '1000',
      COLLECTOR_BATCH_SIZE: '25',
      WEB_DIR: '/srv/web',
    });
    expect(config).toMatchObject({
      port: 0,
      host: '0.0.0.0',
      trustProxy: '10.0.0.0/8, 192.168.1.1',
      databaseUrl: 'postgres://gw@db:5432/gateway',
      redisUrl: 'redis://cache:6379',
      adminToken: 'b'.repeat(16),
      logLevel: 'debug',
      providers: {
        anthropic: { apiKey: 'sk-ant', baseUrl: 'http://127.0.0.1:4010' },
        google: { apiKey: 'g-key', baseUrl: 'http://127.0.0.1:4011' },
      },
      modelsFile: '/etc/paygate/models.json',
      defaultModel: 'google/gemini-3.8-flash',
      commissionBps: 0,
      settleOnCompletion: true,
      chain: {
        chainId: 31337,
        usdcAddress: getAddress('0x00000000000000000000000000000000000000bb'),
        delegationManagerAddress: getAddress('0x00000000000000000000000000000000000000cc'),
        facilitatorUrl: 'https://x402.example/facilitator',
        pollIntervalMs: 40,
        // Above 2^53: read exactly.
        maxFeePerGasWei: 50_000_000_000_000_000_000n,
      },
      limits: {
        bodyLimitBytes: 1024,
        requestTimeoutMs: 120_000,
        databaseQueryTimeoutMs: 0,
        rateLimitMax: 10,
        rateLimitWindowMs: 1000,
        routeRateLimits: { '/v1/chat/completions': 600, '/v1/models/*': 30 },
        maxInFlightPerPayer: 1,
        upstreamTimeoutMs: 100,
        upstreamCompletionTimeoutMs: 200,
        streamHeartbeatMs: 5000,
        streamBufferBudgetBytes: 1_048_576,
        collectorIdleMs: 1000,
        collectorBatchSize: 25,
      },
      webDir: '/srv/web',
    });
  });

  test.each([
    ['true', true],
    ['false', undefined],
    ['::1', '::1'],
  ])('TRUST_PROXY=%s', (value, expected) => {
    expect(loadConfig({ ...minimal, TRUST_PROXY: value }).trustProxy).toBe(expected);
  });

  test('takes every secp256k1 private key, 1 to n-1, the one viem signs with', () => {
    for (const value of [1n, CURVE_ORDER - 1n]) {
      const sessionKey = loadConfig({ ...minimal, SESSION_KEY_PRIVATE_KEY: key(value) }).chain
        .sessionKeyPrivateKey;
      expect(sessionKey).toBe(key(value));
      expect(() => privateKeyToAccount(sessionKey)).not.toThrow();
    }
  });

  test('takes operator tokens, trimmed, without whitespace inside', () => {
    const config = loadConfig({
      ...minimal,
      ADMIN_TOKEN: ` ${'b'.repeat(16)}\n`,
      METRICS_TOKEN: `\t${'m'.repeat(16)} `,
    });
    expect(config).toMatchObject({ adminToken: 'b'.repeat(16), metricsToken: 'm'.repeat(16) });
  });

  test('an empty value counts as unset', () => {
    expect(loadConfig({ ...minimal, PORT: '', REDIS_URL: '  ' })).toMatchObject({
      port: 8080,
      redisUrl: undefined,
    });
  });
});

describe('REQUEST_TIMEOUT_MS when unset', () => {
  test.each([
    ['1048576', 30_000],
    ['100000000', 715_000],
  ])('follows BODY_LIMIT_BYTES=%s (140 KB/s, at least 30 s): %i', (bodyLimit, timeoutMs) => {
    expect(loadConfig({ ...minimal, BODY_LIMIT_BYTES: bodyLimit }).limits.requestTimeoutMs).toBe(timeoutMs);
  });
});

describe('DATABASE_URL', () => {
  test.each([
    ['a plain path', './data/gw.sqlite', './data/gw.sqlite'],
    ['an absolute path', '/var/lib/paygate/gw.sqlite', '/var/lib/paygate/gw.sqlite'],
    ['sqlite:/// with an absolute path', 'sqlite:///var/lib/paygate/gw.sqlite', '/var/lib/paygate/gw.sqlite'],
    ['sqlite:// with a relative path', 'sqlite://./data/gw.sqlite', './data/gw.sqlite'],
    ['sqlite: with a relative path', 'sqlite:gw.sqlite', 'gw.sqlite'],
    ['SQLITE: in capitals', 'SQLITE:gw.sqlite', 'gw.sqlite'],
    ['file: with a relative path', 'file:gw.sqlite', 'gw.sqlite'],
    ['file:/// with an absolute path', 'file:///var/lib/paygate/gw.sqlite', '/var/lib/paygate/gw.sqlite'],
    ['a percent-encoded space', 'sqlite:///srv/pay%20gate/gw.sqlite', '/srv/pay gate/gw.sqlite'],
    ['sqlite::memory:', 'sqlite::memory:', ':memory:'],
    ['sqlite://:memory:', 'sqlite://:memory:', ':memory:'],
    ['a postgres:// URL, as given', 'postgres://gw@db:5432/gateway', 'postgres://gw@db:5432/gateway'],
    [
      'a postgresql:// URL, as given',
      'postgresql://gw@db/gateway?sslmode=require',
      'postgresql://gw@db/gateway?sslmode=require',
    ],
  ])('%s (%s) opens %s', (_spelling, url, opened) => {
    expect(loadConfig({ ...minimal, DATABASE_URL: url }).databaseUrl).toBe(opened);
  });
});

describe('each invalid variable stops start-up with one message naming it', () => {
  const cases: Array<[string, Record<string, string | undefined>, string]> = [
    ['PORT', { PORT: 'eighty' }, 'must be a whole number, got "eighty"'],
    ['PORT', { PORT: '65536' }, 'must be between 0 and 65535'],
    ['TRUST_PROXY', { TRUST_PROXY: 'yes' }, 'must be true, false, or IP addresses/CIDRs, got "yes"'],
    ['TRUST_PROXY', { TRUST_PROXY: '10.0.0.0/33' }, 'got "10.0.0.0/33"'],
    [
      'DATABASE_URL',
      { DATABASE_URL: 'mysql://db/gw' },
      'must be a SQLite file (a path, a sqlite: or file: URL) or a postgres:// URL, got a mysql:// URL',
    ],
    ['DATABASE_URL', { DATABASE_URL: 'sqlite://' }, 'must name a SQLite file after sqlite: or file:'],
    ['DATABASE_URL', { DATABASE_URL: 'sqlite:' }, 'must name a SQLite file after sqlite: or file:'],
    [
      'DATABASE_URL',
      { DATABASE_URL: 'file:./dev.db?mode=ro' },
      'without query parameters, got "./dev.db?mode=ro"',
    ],
    [
      'DATABASE_URL',
      { DATABASE_URL: 'sqlite:///data/%ZZ.db' },
      'in valid percent-encoding, got "/data/%ZZ.db"',
    ],
    ['REDIS_URL', { REDIS_URL: 'cache:6379' }, 'must use redis or rediss'],
    ['REDIS_URL', { REDIS_URL: 'not a url' }, 'must be a URL, got "not a url"'],
    ['JWT_SECRET', { JWT_SECRET: undefined }, 'is required'],
    ['JWT_SECRET', { JWT_SECRET: 'short' }, 'must be at least 32 characters'],
    ['ADMIN_TOKEN', { ADMIN_TOKEN: 'short' }, 'must be at least 16 characters'],
    // A bearer token is one run of non-space characters: one with a space inside never matches.
    ['ADMIN_TOKEN', { ADMIN_TOKEN: 'operator token 1234' }, 'must not contain whitespace'],
    ['ADMIN_TOKEN', { ADMIN_TOKEN: `${'a'.repeat(8)}\t${'b'.repeat(8)}` }, 'must not contain whitespace'],
    ['METRICS_TOKEN', { METRICS_TOKEN: 'short' }, 'must be at least 16 characters'],
    ['METRICS_TOKEN', { METRICS_TOKEN: `${'m'.repeat(8)}\n${'n'.repeat(8)}` }, 'must not contain whitespace'],
    ['LOG_LEVEL', { LOG_LEVEL: 'verbose' }, 'must be one of fatal, error, warn, info, debug, trace, silent'],
    ['ANTHROPIC_BASE_URL', { ANTHROPIC_BASE_URL: 'ftp://x' }, 'must use http or https'],
    ['GEMINI_BASE_URL', { GEMINI_BASE_URL: '//nohost' }, 'must be a URL'],
    ['COMMISSION_BPS', { COMMISSION_BPS: '-1' }, 'must be a whole number'],
    ['COMMISSION_BPS', { COMMISSION_BPS: '100001' }, 'must be between 0 and 100000'],
    ['CHAIN_RPC_URL', { CHAIN_RPC_URL: undefined }, 'is required'],
    ['CHAIN_RPC_URL', { CHAIN_RPC_URL: 'file:///tmp/x' }, 'must use http or https or ws or wss'],
    ['CHAIN_ID', { CHAIN_ID: '0' }, 'must be between 1 and'],
    ['CHAIN_ID', { CHAIN_ID: '0x2105' }, 'must be a whole number'],
    ['USDC_ADDRESS', { CHAIN_ID: '31337' }, 'is required'],
    ['USDC_ADDRESS', { USDC_ADDRESS: '0x1234' }, 'must be a 0x-prefixed 20-byte address'],
    ['USDC_ADDRESS', { USDC_ADDRESS: ZERO_ADDRESS }, 'must not be the zero address'],
    ['USDC_ADDRESS', { CHAIN_ID: '31337', USDC_ADDRESS: ZERO_ADDRESS }, 'must not be the zero address'],
    ['TREASURY_ADDRESS', { TREASURY_ADDRESS: undefined }, 'is required'],
    ['TREASURY_ADDRESS', { TREASURY_ADDRESS: 'treasury.eth' }, 'must be a 0x-prefixed 20-byte address'],
    // USDC refuses transfers to the zero address: every settlement would fail.
    ['TREASURY_ADDRESS', { TREASURY_ADDRESS: ZERO_ADDRESS }, 'must not be the zero address'],
    ['SESSION_KEY_PRIVATE_KEY', { SESSION_KEY_PRIVATE_KEY: undefined }, 'is required'],
    [
      'SESSION_KEY_PRIVATE_KEY',
      { SESSION_KEY_PRIVATE_KEY: '11'.repeat(32) },
      'must be a 0x-prefixed 32-byte hex key',
    ],
    // Well-formed but no secp256k1 key: viem would throw later, naming no variable.
    ['SESSION_KEY_PRIVATE_KEY', { SESSION_KEY_PRIVATE_KEY: key(0n) }, 'must be a secp256k1 private key'],
    ['SESSION_KEY_PRIVATE_KEY', { SESSION_KEY_PRIVATE_KEY: key(CURVE_ORDER) }, 'below the curve order n'],
    [
      'SESSION_KEY_PRIVATE_KEY',
      { SESSION_KEY_PRIVATE_KEY: `0x${'ff'.repeat(32)}` },
      'below the curve order n',
    ],
    [
      'DELEGATION_MANAGER_ADDRESS',
      { DELEGATION_MANAGER_ADDRESS: '0xzz' },
      'must be a 0x-prefixed 20-byte address',
    ],
    [
      'DELEGATION_MANAGER_ADDRESS',
      { DELEGATION_MANAGER_ADDRESS: ZERO_ADDRESS },
      'must not be the zero address',
    ],
    ['FACILITATOR_URL', { FACILITATOR_URL: 'ws://f' }, 'must use http or https'],
    ['CHAIN_POLL_INTERVAL_MS', { CHAIN_POLL_INTERVAL_MS: '0' }, 'must be between 1 and 60000'],
    ['SETTLE_ON_COMPLETION', { SETTLE_ON_COMPLETION: 'yes' }, 'must be true or false, got "yes"'],
    [
      'RELAYER_MAX_FEE_PER_GAS_WEI',
      { RELAYER_MAX_FEE_PER_GAS_WEI: '1e9' },
      'must be a whole number, got "1e9"',
    ],
    ['RELAYER_MAX_FEE_PER_GAS_WEI', { RELAYER_MAX_FEE_PER_GAS_WEI: '0' }, 'must be at least 1'],
    ['BODY_LIMIT_BYTES', { BODY_LIMIT_BYTES: '1023' }, 'must be between 1024 and'],
    ['REQUEST_TIMEOUT_MS', { REQUEST_TIMEOUT_MS: '0' }, 'must be between 1000 and'],
    ['REQUEST_TIMEOUT_MS', { REQUEST_TIMEOUT_MS: '999' }, 'must be between 1000 and'],
    ['REQUEST_TIMEOUT_MS', { REQUEST_TIMEOUT_MS: 'soon' }, 'must be a whole number, got "soon"'],
    ['DATABASE_QUERY_TIMEOUT_MS', { DATABASE_QUERY_TIMEOUT_MS: '-1' }, 'must be a whole number, got "-1"'],
    [
      'DATABASE_QUERY_TIMEOUT_MS',
      { DATABASE_QUERY_TIMEOUT_MS: '86400001' },
      'must be between 0 and 86400000',
    ],
    ['RATE_LIMIT_MAX', { RATE_LIMIT_MAX: '0' }, 'must be between 1 and'],
    ['RATE_LIMIT_WINDOW_MS', { RATE_LIMIT_WINDOW_MS: '1.5' }, 'must be a whole number, got "1.5"'],
    [
      'RATE_LIMITS',
      { RATE_LIMITS: '/v1/models' },
      'must be a comma-separated list of <path>=<requests>, got "/v1/models"',
    ],
    ['RATE_LIMITS', { RATE_LIMITS: 'v1/models=5' }, 'got "v1/models=5"'],
    ['RATE_LIMITS', { RATE_LIMITS: '/v1/models=5,' }, 'got ""'],
    ['RATE_LIMITS', { RATE_LIMITS: '/v1/models=-5' }, 'got "/v1/models=-5"'],
    [
      'RATE_LIMITS',
      { RATE_LIMITS: '/v1/models=0' },
      'must allow a whole number of requests >= 1 on /v1/models',
    ],
    ['RATE_LIMITS', { RATE_LIMITS: '/health=1,/health=2' }, 'lists /health twice'],
    ['MAX_IN_FLIGHT_PER_PAYER', { MAX_IN_FLIGHT_PER_PAYER: '0' }, 'must be between 1 and'],
    ['UPSTREAM_TIMEOUT_MS', { UPSTREAM_TIMEOUT_MS: '99' }, 'must be between 100 and'],
    ['STREAM_HEARTBEAT_MS', { STREAM_HEARTBEAT_MS: '99' }, 'must be between 100 and'],
    ['UPSTREAM_TIMEOUT_MS', { UPSTREAM_TIMEOUT_MS: '2147483648' }, 'must be between 100 and 2147483647'],
    ['STREAM_BUFFER_BUDGET_BYTES', { STREAM_BUFFER_BUDGET_BYTES: '65535' }, 'must be between 65536 and'],
    ['COLLECTOR_IDLE_MS', { COLLECTOR_IDLE_MS: 'soon' }, 'must be a whole number'],
    ['COLLECTOR_BATCH_SIZE', { COLLECTOR_BATCH_SIZE: '0' }, 'must be between 1 and'],
  ];
  test.each(cases)('%s: %j', (variable, env, problem) => {
    const error = refusal(env);
    expect(error.variable).toBe(variable);
    expect(error.message.startsWith(`Invalid configuration: ${variable} `)).toBe(true);
    expect(error.message).toContain(problem);
    expect(error.message).not.toContain('\n');
  });
});
