import { existsSync, readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { fileURLToPath } from 'node:url';
import type { SmartAccountsEnvironment } from '@metamask/smart-accounts-kit';
import { type Address, getAddress, type Hex, isAddress, isHex, zeroAddress } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';

/** Everything the gateway needs to run; built from the environment by `loadConfig`, or by tests directly. */
export interface GatewayConfig {
  port: number;
  host: string;
  /**
   * Which proxies' `X-Forwarded-For` to believe for the caller's IP (rate limits key on it):
   * true (any) or comma-separated addresses/CIDRs of the proxies. Off when absent.
   */
  trustProxy?: boolean | string;
  /** A SQLite file path (default) or a `postgres://` URL. */
  databaseUrl: string;
  redisUrl?: string;
  jwtSecret: string;
  /** Operator token for GraphQL queries about any wallet. */
  adminToken?: string;
  /**
   * Bearer token for GET /metrics (ADMIN_TOKEN works too). With neither set, only loopback
   * callers may scrape.
   */
  metricsToken?: string;
  logLevel: string;
  providers: {
    anthropic: UpstreamConfig & {
      /**
       * ANTHROPIC_AUTO_CACHE: requests that mark no `cache_control` get prompt cache breakpoints
       * after their instructions and their history (see providers/anthropic/prompt-cache.ts).
       */
      autoCache?: boolean;
    };
    google: UpstreamConfig;
  };
  /** Replaces the shipped catalog when set. */
  modelsFile?: string;
  /** The model used when a chat request names none. */
  defaultModel: string;
  commissionBps: number;
  /**
   * SETTLE_ON_COMPLETION: settle a session payer's debt as soon as its request completes, in the
   * background, instead of when its next request arrives (which then usually finds nothing owed).
   */
  settleOnCompletion: boolean;
  exposure: ExposureConfig;
  chain: ChainConfig;
  limits: LimitsConfig;
  /** Directory of the built dashboard; served at `/` when it exists. */
  webDir?: string;
  /** A local chain's test-money faucet (set by the local stack only), published to the dashboard. */
  devFaucetUrl?: string;
}

export interface UpstreamConfig {
  apiKey?: string;
  baseUrl: string;
}

export interface ChainConfig {
  rpcUrl: string;
  chainId: number;
  usdcAddress: Address;
  treasuryAddress: Address;
  /** The gateway's delegate and relayer key. */
  sessionKeyPrivateKey: Hex;
  /** Set when the local chain's Delegation Framework is not at the kit's known addresses. */
  delegationManagerAddress?: Address;
  /**
   * The Delegation Framework contracts (DelegationManager, caveat enforcers) of a chain the
   * smart-accounts kit does not know, e.g. a local anvil: CHAIN_ENVIRONMENT_FILE.
   */
  delegationEnvironment?: SmartAccountsEnvironment;
  facilitatorUrl?: string;
  /**
   * How often a settlement waiting for its transaction asks the chain for a new block
   * (CHAIN_POLL_INTERVAL_MS): a settlement ends up to this long after its block.
   */
  pollIntervalMs: number;
  /**
   * The most the relayer offers per gas, in wei (RELAYER_MAX_FEE_PER_GAS_WEI): settlements are sent
   * at most at this fee and not replaced above it. Unset: whatever the market asks.
   */
  maxFeePerGasWei?: bigint;
}

/** The exposure budget's limits on what the gateway serves before it is paid. */
export interface ExposureConfig {
  /** UNPROVEN_PAYER_MAX_USD: the most a payer with no confirmed payment may owe and have in flight (USDC atomic). */
  unprovenPayerMaxAtomic: bigint;
  /** UNPROVEN_EXPOSURE_MAX_USD_PER_HOUR: what all such payers together may be served in an hour (pico-USD). */
  unprovenHourlyMaxPicoUsd: bigint;
  /** BALANCE_MAX_AGE_MS: how long a payer's USDC balance read from the chain is used (at most a block). */
  balanceMaxAgeMs: number;
  /**
   * MIN_SETTLEMENT_USD (pico-USD): a session payer's debt below it is carried instead of settled before
   * its next request, within the limits above; the collector settles it once idle. 0: the strict rule.
   */
  minSettlementPicoUsd: bigint;
}

export interface LimitsConfig {
  /** Largest accepted request body, in bytes. */
  bodyLimitBytes: number;
  /**
   * Longest time to receive a whole request, headers and body (REQUEST_TIMEOUT_MS): a client
   * stalling mid-request gets 408 and its connection closed. Answers (streams) are not bounded by
   * it. Default `defaultRequestTimeoutMs(bodyLimitBytes)`.
   */
  requestTimeoutMs?: number;
  /** Requests per window per caller (wallet once known, IP before). */
  rateLimitMax: number;
  rateLimitWindowMs: number;
  /** Route path (as registered, e.g. `/v1/chat/completions`) -> requests per window, replacing `rateLimitMax` there. */
  routeRateLimits: Readonly<Record<string, number>>;
  /** Requests of one payer in flight at once; beyond it 429. */
  maxInFlightPerPayer: number;
  /**
   * With Redis: how long an in-flight slot outlives its instance's last refresh, i.e. how soon
   * the slots of an instance that died are free again. Default 30 s.
   */
  inFlightSlotTtlMs?: number;
  /** Longest wait for a provider's response headers, and between two chunks of its body. */
  upstreamTimeoutMs: number;
  /** Longest wait for a whole non-streamed answer (providers send its headers once it is generated). */
  upstreamCompletionTimeoutMs: number;
  /** TCP + TLS connect to a provider. */
  upstreamConnectTimeoutMs: number;
  /** Silence after which a stream gets a keep-alive comment (proxies cut idle connections). */
  streamHeartbeatMs: number;
  /**
   * How long a shutdown waits for the requests in flight before it cuts their provider calls (a
   * stream is billed as far as counted and ends with an error event), so that the provider calls
   * end before an orchestrator's kill (Kubernetes waits 30 s); settlements being confirmed are not
   * cut (the next start finishes them). Default 25 s.
   */
  shutdownTimeoutMs: number;
  /** The most the streams of slow clients may hold unread together; past it some are cut off (see StreamBuffers). */
  streamBufferBudgetBytes: number;
  /** Debts idle longer than this are settled by the collector (session rail). */
  collectorIdleMs: number;
  /** How often the collector looks for idle debts and unfinished settlements. */
  collectorIntervalMs: number;
  /** Idle debtors the collector tries to settle per run, at most. */
  collectorBatchSize: number;
  /** Longest wait for a settlement's receipt before the request is refused (the outbox finishes it later). */
  settlementTimeoutMs: number;
  /**
   * The longest the session rail's settlements falling due wait for the transaction being mined
   * before they are sent (together, in one transaction) anyway (SETTLEMENT_BATCH_WAIT_MS).
   */
  settlementBatchWaitMs: number;
  /**
   * PostgreSQL: how long a query may go unanswered before its connection is taken for dead and
   * dropped (DATABASE_QUERY_TIMEOUT_MS; 0: never). Default DEFAULT_DATABASE_QUERY_TIMEOUT_MS.
   */
  databaseQueryTimeoutMs?: number;
  /** Latest expiry a session delegation may have, in seconds from now. */
  sessionMaxLifetimeSeconds: number;
  /** Smallest amount cap (total, or per period) a session delegation may set, in USDC atomic units. */
  sessionMinCapAtomic: bigint;
  /**
   * /health warns when the relayer's ETH pays fewer settlements than this at the current gas price
   * (RELAYER_MIN_SETTLEMENTS_LEFT). Default DEFAULT_RELAYER_MIN_SETTLEMENTS_LEFT.
   */
  relayerMinSettlementsLeft?: number;
}

/** Start-up refuses to run with it; the message names the variable. */
export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    problem: string,
  ) {
    super(`Invalid configuration: ${variable} ${problem}`);
    this.name = 'ConfigError';
  }
}

export const DEFAULT_ANTHROPIC_BASE_URL = 'https://api.anthropic.com';
export const DEFAULT_GEMINI_BASE_URL = 'https://generativelanguage.googleapis.com';

/** Canonical USDC deployments, so operators on Base need not configure the token. */
const KNOWN_USDC: Record<number, Address> = {
  8453: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
  84532: '0x036CbD53842c5426634e7929541eC2318f3dCF7e',
};

/** The SQLite file used when DATABASE_URL is not set (also by `npm run migrate`). */
export const DEFAULT_DATABASE_URL = './data/gateway.sqlite';

type Env = Record<string, string | undefined>;

/** The repository's built dashboard (`npm run build -w web`), served when WEB_DIR is not set. */
function bundledWebDir(): string | undefined {
  const dir = fileURLToPath(new URL('../../web/dist', import.meta.url));
  return existsSync(`${dir}/index.html`) ? dir : undefined;
}

/** DATABASE_URL alone, checked as `loadConfig` checks it (for `npm run migrate`). */
export function loadDatabaseUrl(env: Env = process.env): string {
  return new EnvReader(env).databaseUrl('DATABASE_URL', DEFAULT_DATABASE_URL);
}

/** What `npm run reconcile` reads: the ledger and the chain, named as the gateway names them. */
export interface ReconcileConfig {
  databaseUrl: string;
  chain: Pick<ChainConfig, 'rpcUrl' | 'chainId' | 'usdcAddress' | 'treasuryAddress'>;
  /** The gateway's sender (SESSION_KEY_PRIVATE_KEY's address), when given: its unrecorded transfers are mismatches. */
  relayer?: Address;
}

export function loadReconcileConfig(env: Env = process.env): ReconcileConfig {
  const read = new EnvReader(env);
  const chainId = read.integer('CHAIN_ID', 8453, 1);
  return {
    databaseUrl: read.databaseUrl('DATABASE_URL', DEFAULT_DATABASE_URL),
    chain: readPaymentChain(read, chainId),
    ...(env.SESSION_KEY_PRIVATE_KEY && {
      relayer: privateKeyToAccount(read.privateKey('SESSION_KEY_PRIVATE_KEY')).address,
    }),
  };
}

/** Where payments go: the chain's RPC, the token and the treasury. */
function readPaymentChain(read: EnvReader, chainId: number): ReconcileConfig['chain'] {
  const knownUsdc = KNOWN_USDC[chainId];
  return {
    rpcUrl: read.requiredUrl('CHAIN_RPC_URL', ['http:', 'https:', 'ws:', 'wss:']),
    chainId,
    usdcAddress: knownUsdc ? read.address('USDC_ADDRESS', knownUsdc) : read.requiredAddress('USDC_ADDRESS'),
    treasuryAddress: read.requiredAddress('TREASURY_ADDRESS'),
  };
}

/** The longest delay a Node.js timer takes (a longer one fires at once). */
const MAX_TIMER_MS = 2_147_483_647;

/**
 * DATABASE_QUERY_TIMEOUT_MS when unset: far above any query the gateway runs while serving, far
 * below the 15 minutes a dead connection waits for TCP. Migrations go without (an index built over
 * a large table may take minutes).
 */
export const DEFAULT_DATABASE_QUERY_TIMEOUT_MS = 60_000;

/**
 * BODY_LIMIT_BYTES when unset: the largest request Anthropic's Messages API takes (32 MB), so a
 * multimodal request a provider accepts is not refused here. Gemini takes up to 100 MB inline.
 */
export const DEFAULT_BODY_LIMIT_BYTES = 32 * 1024 * 1024;

/** REQUEST_TIMEOUT_MS when unset: a whole body of BODY_LIMIT_BYTES at 140 KB/s, and at least 30 s. */
export function defaultRequestTimeoutMs(bodyLimitBytes: number): number {
  return Math.max(30_000, Math.ceil(bodyLimitBytes / 140 / 1000) * 1000);
}
export const DEFAULT_RELAYER_MIN_SETTLEMENTS_LEFT = 1000;

// Local chains (anvil, hardhat) mine every fraction of a second: polled often, a settlement
// ends within a few milliseconds of its block. Elsewhere a quarter second: on Base's 2 s blocks,
// eight block-number reads per settlement.
const LOCAL_CHAIN_IDS = new Set([31337, 1337]);
/** A block on Base (2 s), or on the local chain `npm start` runs (0.2 s). */
const defaultBlockTimeMs = (chainId: number) => (LOCAL_CHAIN_IDS.has(chainId) ? 200 : 2_000);
const defaultPollIntervalMs = (chainId: number) => (LOCAL_CHAIN_IDS.has(chainId) ? 10 : 250);

export function loadConfig(env: Env = process.env): GatewayConfig {
  const read = new EnvReader(env);
  const chainId = read.integer('CHAIN_ID', 8453, 1);
  const bodyLimitBytes = read.integer('BODY_LIMIT_BYTES', DEFAULT_BODY_LIMIT_BYTES, 1024);
  return {
    port: read.integer('PORT', 8080, 0, 65535),
    host: read.string('HOST', '127.0.0.1'),
    trustProxy: read.trustProxy('TRUST_PROXY'),
    databaseUrl: read.databaseUrl('DATABASE_URL', DEFAULT_DATABASE_URL),
    redisUrl: read.url('REDIS_URL', ['redis:', 'rediss:']),
    jwtSecret: read.secret('JWT_SECRET', 32),
    adminToken: read.optionalBearerToken('ADMIN_TOKEN', 16),
    metricsToken: read.optionalBearerToken('METRICS_TOKEN', 16),
    logLevel: read.oneOf('LOG_LEVEL', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], 'info'),
    providers: {
      anthropic: {
        apiKey: read.optional('ANTHROPIC_API_KEY'),
        baseUrl: read.url('ANTHROPIC_BASE_URL', ['http:', 'https:']) ?? DEFAULT_ANTHROPIC_BASE_URL,
        autoCache: read.boolean('ANTHROPIC_AUTO_CACHE', false),
      },
      google: {
        apiKey: read.optional('GEMINI_API_KEY'),
        baseUrl: read.url('GEMINI_BASE_URL', ['http:', 'https:']) ?? DEFAULT_GEMINI_BASE_URL,
      },
    },
    modelsFile: read.optional('MODELS_FILE'),
    defaultModel: read.string('DEFAULT_MODEL', 'anthropic/claude-sonnet-5.5'),
    commissionBps: read.integer('COMMISSION_BPS', 1000, 0, 100_000),
    settleOnCompletion: read.boolean('SETTLE_ON_COMPLETION', false),
    exposure: {
      unprovenPayerMaxAtomic: read.usdAtomic('UNPROVEN_PAYER_MAX_USD', 100_000n),
      // 1e6 pico-USD per atomic unit.
      unprovenHourlyMaxPicoUsd:
        read.usdAtomic('UNPROVEN_EXPOSURE_MAX_USD_PER_HOUR', 10_000_000n) * 1_000_000n,
      balanceMaxAgeMs: read.integer('BALANCE_MAX_AGE_MS', defaultBlockTimeMs(chainId), 0, 60_000),
      minSettlementPicoUsd: read.usdAtomic('MIN_SETTLEMENT_USD', 0n) * 1_000_000n,
    },
    chain: {
      ...readPaymentChain(read, chainId),
      sessionKeyPrivateKey: read.privateKey('SESSION_KEY_PRIVATE_KEY'),
      delegationManagerAddress: read.optionalAddress('DELEGATION_MANAGER_ADDRESS'),
      delegationEnvironment: read.delegationEnvironment('CHAIN_ENVIRONMENT_FILE'),
      facilitatorUrl: read.url('FACILITATOR_URL', ['http:', 'https:']),
      pollIntervalMs: read.integer('CHAIN_POLL_INTERVAL_MS', defaultPollIntervalMs(chainId), 1, 60_000),
      maxFeePerGasWei: read.optionalBigint('RELAYER_MAX_FEE_PER_GAS_WEI', 1n),
    },
    limits: {
      bodyLimitBytes,
      requestTimeoutMs: read.integer(
        'REQUEST_TIMEOUT_MS',
        defaultRequestTimeoutMs(bodyLimitBytes),
        1000,
        MAX_TIMER_MS,
      ),
      rateLimitMax: read.integer('RATE_LIMIT_MAX', 600, 1),
      rateLimitWindowMs: read.integer('RATE_LIMIT_WINDOW_MS', 60_000, 1000, MAX_TIMER_MS),
      // Each authorization costs the gateway chain reads and a stored session: a lower limit of its own.
      routeRateLimits: {
        'POST /v1/authorize': read.integer('RATE_LIMIT_AUTHORIZE_MAX', 30, 1),
        ...read.routeLimits('RATE_LIMITS'),
      },
      maxInFlightPerPayer: read.integer('MAX_IN_FLIGHT_PER_PAYER', 8, 1),
      inFlightSlotTtlMs: read.integer('IN_FLIGHT_SLOT_TTL_MS', 30_000, 1000, MAX_TIMER_MS),
      upstreamTimeoutMs: read.integer('UPSTREAM_TIMEOUT_MS', 120_000, 100, MAX_TIMER_MS),
      upstreamCompletionTimeoutMs: read.integer('UPSTREAM_COMPLETION_TIMEOUT_MS', 600_000, 100, MAX_TIMER_MS),
      upstreamConnectTimeoutMs: read.integer('UPSTREAM_CONNECT_TIMEOUT_MS', 10_000, 100, MAX_TIMER_MS),
      streamHeartbeatMs: read.integer('STREAM_HEARTBEAT_MS', 15_000, 100, 3_600_000),
      shutdownTimeoutMs: read.integer('SHUTDOWN_TIMEOUT_MS', 25_000, 0, MAX_TIMER_MS),
      streamBufferBudgetBytes: read.integer('STREAM_BUFFER_BUDGET_BYTES', 64 * 1024 * 1024, 64 * 1024),
      collectorIdleMs: read.integer('COLLECTOR_IDLE_MS', 15 * 60_000, 1000),
      collectorIntervalMs: read.integer('COLLECTOR_INTERVAL_MS', 30_000, 100, MAX_TIMER_MS),
      collectorBatchSize: read.integer('COLLECTOR_BATCH_SIZE', 100, 1),
      settlementTimeoutMs: read.integer('SETTLEMENT_TIMEOUT_MS', 60_000, 1000, MAX_TIMER_MS),
      settlementBatchWaitMs: read.integer('SETTLEMENT_BATCH_WAIT_MS', 3_000, 0, MAX_TIMER_MS),
      databaseQueryTimeoutMs: read.integer(
        'DATABASE_QUERY_TIMEOUT_MS',
        DEFAULT_DATABASE_QUERY_TIMEOUT_MS,
        0,
        // A day: the client's own bound adds to it (a lock wait, a grace), within Node's timers.
        86_400_000,
      ),
      sessionMaxLifetimeSeconds: read.integer('SESSION_MAX_LIFETIME_SECONDS', 30 * 86_400, 60),
      sessionMinCapAtomic: BigInt(read.integer('SESSION_MIN_CAP_ATOMIC', 10_000, 1)),
      relayerMinSettlementsLeft: read.integer(
        'RELAYER_MIN_SETTLEMENTS_LEFT',
        DEFAULT_RELAYER_MIN_SETTLEMENTS_LEFT,
        0,
      ),
    },
    webDir: read.optional('WEB_DIR') ?? bundledWebDir(),
    devFaucetUrl: read.url('DEV_FAUCET_URL', ['http:', 'https:']),
  };
}

/** The file a `sqlite:` or `file:` URL names (`rest` follows the scheme's colon), `:memory:` included. */
function sqliteUrlPath(name: string, rest: string): string {
  // `//` opens an empty authority (`sqlite:///abs.db`) or, as commonly written, a relative path (`sqlite://./rel.db`).
  const encoded = rest.startsWith('//') ? rest.slice(2) : rest;
  if (/[?#]/.test(encoded))
    throw new ConfigError(name, `must name a SQLite file without query parameters, got "${encoded}"`);
  let path: string;
  try {
    path = decodeURIComponent(encoded);
  } catch {
    throw new ConfigError(name, `must name a SQLite file in valid percent-encoding, got "${encoded}"`);
  }
  if (path === '') throw new ConfigError(name, 'must name a SQLite file after sqlite: or file:');
  return path;
}

/** Reads one variable at a time and throws a `ConfigError` naming it when it is wrong. */
class EnvReader {
  constructor(private readonly env: Env) {}

  optional(name: string): string | undefined {
    const value = this.env[name]?.trim();
    return value === '' ? undefined : value;
  }

  string(name: string, fallback: string): string {
    return this.optional(name) ?? fallback;
  }

  required(name: string): string {
    const value = this.optional(name);
    if (value === undefined) throw new ConfigError(name, 'is required');
    return value;
  }

  integer(name: string, fallback: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
    const raw = this.wholeNumber(name);
    if (raw === undefined) return fallback;
    const value = Number(raw);
    if (value < min || value > max) throw new ConfigError(name, `must be between ${min} and ${max}`);
    return value;
  }

  /** The digits of a whole number, or undefined when unset. */
  private wholeNumber(name: string): string | undefined {
    const raw = this.optional(name);
    if (raw !== undefined && !/^\d+$/.test(raw))
      throw new ConfigError(name, `must be a whole number, got "${raw}"`);
    return raw;
  }

  /** A whole number of any size (an amount in wei), or undefined when unset. */
  optionalBigint(name: string, min: bigint): bigint | undefined {
    const raw = this.wholeNumber(name);
    if (raw === undefined) return undefined;
    const value = BigInt(raw);
    if (value < min) throw new ConfigError(name, `must be at least ${min}`);
    return value;
  }

  /** A USD amount with at most 6 decimals ("0.10"), in USDC atomic units. */
  usdAtomic(name: string, fallback: bigint): bigint {
    const raw = this.optional(name);
    if (raw === undefined) return fallback;
    const match = /^(\d{1,12})(?:\.(\d{1,6}))?$/.exec(raw);
    if (!match) throw new ConfigError(name, `must be a USD amount with at most 6 decimals, got "${raw}"`);
    return BigInt(match[1] as string) * 1_000_000n + BigInt((match[2] ?? '').padEnd(6, '0'));
  }

  /**
   * A PostgreSQL URL as given, or a SQLite file as its path: a plain path, or a `sqlite:` or `file:`
   * URL (`sqlite:///abs.db`, `sqlite://./rel.db`, `sqlite:rel.db`, `file:rel.db`, `sqlite::memory:`).
   * Any other URL scheme is a mistake, not a file name.
   */
  databaseUrl(name: string, fallback: string): string {
    const value = this.string(name, fallback);
    const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(value)?.[1]?.toLowerCase();
    if (scheme === 'sqlite' || scheme === 'file') return sqliteUrlPath(name, value.slice(scheme.length + 1));
    if (scheme !== undefined && scheme !== 'postgres' && scheme !== 'postgresql' && /^[^:]+:\/\//.test(value))
      throw new ConfigError(
        name,
        `must be a SQLite file (a path, a sqlite: or file: URL) or a postgres:// URL, got a ${scheme}:// URL`,
      );
    return value;
  }

  /** `<path>=<max>,<path>=<max>`, e.g. `/v1/chat/completions=600,/v1/authorize=30`. */
  routeLimits(name: string): Record<string, number> {
    const raw = this.optional(name);
    const limits: Record<string, number> = {};
    if (raw === undefined) return limits;
    for (const entry of raw.split(',')) {
      const match = /^\s*(\/[^\s=]*)\s*=\s*(\d+)\s*$/.exec(entry);
      const [, path, max] = match ?? [];
      if (!path || !max)
        throw new ConfigError(
          name,
          `must be a comma-separated list of <path>=<requests>, got "${entry.trim()}"`,
        );
      if (path in limits) throw new ConfigError(name, `lists ${path} twice`);
      const count = Number(max);
      if (!Number.isSafeInteger(count) || count < 1)
        throw new ConfigError(name, `must allow a whole number of requests >= 1 on ${path}`);
      limits[path] = count;
    }
    return limits;
  }

  trustProxy(name: string): boolean | string | undefined {
    const raw = this.optional(name);
    if (raw === undefined || raw === 'false') return undefined;
    if (raw === 'true') return true;
    for (const entry of raw.split(',')) {
      const [address, bits, ...rest] = entry.trim().split('/');
      const version = isIP(address ?? '');
      const maxBits = version === 6 ? 128 : 32;
      if (
        version === 0 ||
        rest.length > 0 ||
        (bits !== undefined && !(/^\d+$/.test(bits) && Number(bits) <= maxBits))
      )
        throw new ConfigError(name, `must be true, false, or IP addresses/CIDRs, got "${entry.trim()}"`);
    }
    return raw;
  }

  boolean(name: string, fallback: boolean): boolean {
    const raw = this.optional(name);
    if (raw === undefined) return fallback;
    if (raw === 'true') return true;
    if (raw === 'false') return false;
    throw new ConfigError(name, `must be true or false, got "${raw}"`);
  }

  oneOf<T extends string>(name: string, allowed: readonly T[], fallback: T): T {
    const raw = this.optional(name);
    if (raw === undefined) return fallback;
    if (!(allowed as readonly string[]).includes(raw))
      throw new ConfigError(name, `must be one of ${allowed.join(', ')}`);
    return raw as T;
  }

  url(name: string, protocols: string[]): string | undefined {
    const raw = this.optional(name);
    if (raw === undefined) return undefined;
    let parsed: URL;
    try {
      parsed = new URL(raw);
    } catch {
      throw new ConfigError(name, `must be a URL, got "${raw}"`);
    }
    if (!protocols.includes(parsed.protocol))
      throw new ConfigError(name, `must use ${protocols.map((p) => p.replace(':', '')).join(' or ')}`);
    return raw.replace(/\/+$/, '');
  }

  requiredUrl(name: string, protocols: string[]): string {
    const value = this.url(name, protocols);
    if (value === undefined) throw new ConfigError(name, 'is required');
    return value;
  }

  secret(name: string, minLength: number): string {
    const value = this.required(name);
    if (value.length < minLength) throw new ConfigError(name, `must be at least ${minLength} characters`);
    return value;
  }

  optionalSecret(name: string, minLength: number): string | undefined {
    return this.optional(name) === undefined ? undefined : this.secret(name, minLength);
  }

  /**
   * A token callers send as `Authorization: Bearer <token>`: a header carries no whitespace inside
   * its token, so one holding any could never be matched.
   */
  optionalBearerToken(name: string, minLength: number): string | undefined {
    const value = this.optionalSecret(name, minLength);
    if (value !== undefined && /\s/.test(value))
      throw new ConfigError(
        name,
        'must not contain whitespace (it is sent as "Authorization: Bearer <token>")',
      );
    return value;
  }

  optionalAddress(name: string): Address | undefined {
    const raw = this.optional(name);
    if (raw === undefined) return undefined;
    if (!isAddress(raw, { strict: false }))
      throw new ConfigError(name, `must be a 0x-prefixed 20-byte address`);
    // Nothing lives at the zero address, and USDC refuses transfers to it.
    if (raw.toLowerCase() === zeroAddress) throw new ConfigError(name, 'must not be the zero address');
    return getAddress(raw);
  }

  address(name: string, fallback: Address): Address {
    return this.optionalAddress(name) ?? fallback;
  }

  requiredAddress(name: string): Address {
    const value = this.optionalAddress(name);
    if (value === undefined) throw new ConfigError(name, 'is required');
    return value;
  }

  /**
   * A JSON file naming the Delegation Framework contracts: a SmartAccountsEnvironment, or an object
   * holding one under `environment` (as the local chain kit writes it).
   */
  delegationEnvironment(name: string): SmartAccountsEnvironment | undefined {
    const path = this.optional(name);
    if (path === undefined) return undefined;
    let parsed: unknown;
    try {
      parsed = JSON.parse(readFileSync(path, 'utf8'));
    } catch (error) {
      throw new ConfigError(name, `must name a readable JSON file (${(error as Error).message})`);
    }
    const candidate = (parsed as { environment?: unknown })?.environment ?? parsed;
    const environment = candidate as Partial<SmartAccountsEnvironment> | null;
    const addresses = [environment?.DelegationManager, ...Object.values(environment?.caveatEnforcers ?? {})];
    if (
      typeof environment?.caveatEnforcers !== 'object' ||
      addresses.some((address) => typeof address !== 'string' || !isAddress(address, { strict: false }))
    )
      throw new ConfigError(name, 'must hold a DelegationManager address and caveatEnforcers addresses');
    return environment as SmartAccountsEnvironment;
  }

  privateKey(name: string): Hex {
    const value = this.required(name);
    if (!isHex(value) || value.length !== 66)
      throw new ConfigError(name, 'must be a 0x-prefixed 32-byte hex key');
    // What viem signs with: a number in [1, n-1] of secp256k1's order n.
    try {
      privateKeyToAccount(value);
    } catch {
      throw new ConfigError(name, 'must be a secp256k1 private key: not zero, and below the curve order n');
    }
    return value;
  }
}
