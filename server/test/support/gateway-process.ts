import { type ChildProcessByStdio, spawn } from 'node:child_process';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { formatUsd, formatUsdcAtomic } from '../../src/billing/money.js';
import type { GatewayConfig } from '../../src/config.js';

const SERVER_DIR = fileURLToPath(new URL('../..', import.meta.url));
const START_TIMEOUT_MS = 30_000;

// As the chain kit does for anvil: a shell between this process and the gateway holds our stdin
// pipe, so a gateway outlives neither `stop()` nor this process (a crashed or killed test worker).
const watchdogScript = [
  'exec 3<&0',
  '"$@" </dev/null 3<&- & child=$!',
  'echo "gateway-pid $child"',
  '(read -r _ <&3; kill -9 "$child" 2>/dev/null) >/dev/null 2>&1 &',
  'wait "$child"',
].join('\n');

/** `src/main.ts` as a process of its own: what an operator runs, one of several instances. */
export interface GatewayProcess {
  url: string;
  /** The gateway's own pid (not its watchdog's). */
  pid: number;
  /** Its JSON log lines so far. */
  logs: Array<Record<string, unknown>>;
  /** Resolves with its exit code (null when a signal ended it). */
  exited: Promise<number | null>;
  /** SIGKILL: dies on the spot, mid-request, as in a crash or an OOM kill. */
  kill(): Promise<void>;
  /** SIGTERM: a graceful shutdown. Safe to call once it is gone. */
  stop(): Promise<void>;
}

/** Starts a gateway process with exactly `env` (plus PATH) and resolves once it listens. */
export async function startGatewayProcess(env: Record<string, string>): Promise<GatewayProcess> {
  const child = spawn(
    '/bin/sh',
    ['-c', watchdogScript, 'gateway-watchdog', process.execPath, '--import', 'tsx', 'src/main.ts'],
    {
      cwd: SERVER_DIR,
      env: { PATH: process.env.PATH, DO_NOT_TRACK: '1', LOG_LEVEL: 'info', ...env, PORT: '0' },
      stdio: ['pipe', 'pipe', 'pipe'],
    },
  );
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  const logs: Array<Record<string, unknown>> = [];
  let stderr = '';
  child.stderr.on('data', (chunk) => {
    stderr = (stderr + chunk).slice(-8_000);
  });
  let pid: number | undefined;
  const listening = new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`the gateway did not listen within ${START_TIMEOUT_MS} ms: ${stderr}`)),
      START_TIMEOUT_MS,
    );
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`the gateway exited (${code}) before listening: ${stderr}`));
    });
    createInterface({ input: child.stdout }).on('line', (line) => {
      pid ??= Number(/^gateway-pid (\d+)$/.exec(line)?.[1]) || undefined;
      let log: Record<string, unknown>;
      try {
        log = JSON.parse(line);
      } catch {
        return;
      }
      logs.push(log);
      const address = /^Server listening at (http:\/\/127\.0\.0\.1:\d+)$/.exec(String(log.msg))?.[1];
      if (address) {
        clearTimeout(timer);
        resolve(address);
      }
    });
  });
  let url: string;
  try {
    url = await listening;
  } catch (error) {
    await end(child, exited, pid, 'SIGKILL');
    throw error;
  }
  return {
    url,
    pid: pid as number,
    logs,
    exited,
    kill: () => end(child, exited, pid, 'SIGKILL'),
    stop: () => end(child, exited, pid, 'SIGTERM'),
  };
}

async function end(
  child: ChildProcessByStdio<Writable, Readable, Readable>,
  exited: Promise<unknown>,
  pid: number | undefined,
  signal: NodeJS.Signals,
): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  if (pid === undefined) {
    // Not started far enough to name its pid: the watchdog kills it once our end of the pipe closes.
    child.stdin.end();
    await exited;
    return;
  }
  try {
    process.kill(pid, signal);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
  await exited;
  child.stdin.end();
}

/**
 * The environment that makes `loadConfig` return `config` (the fields tests set): a config from
 * `chainGatewayConfig` becomes a process's environment. The chain's Delegation Framework goes
 * to a CHAIN_ENVIRONMENT_FILE in `dir`.
 */
export function gatewayEnvironment(config: GatewayConfig, dir: string): Record<string, string> {
  const { chain, limits } = config;
  const env: Record<string, string | undefined> = {
    HOST: '127.0.0.1',
    DATABASE_URL: config.databaseUrl,
    REDIS_URL: config.redisUrl,
    JWT_SECRET: config.jwtSecret,
    ADMIN_TOKEN: config.adminToken,
    ANTHROPIC_API_KEY: config.providers.anthropic.apiKey,
    ANTHROPIC_BASE_URL: config.providers.anthropic.baseUrl,
    GEMINI_API_KEY: config.providers.google.apiKey,
    GEMINI_BASE_URL: config.providers.google.baseUrl,
    MODELS_FILE: config.modelsFile,
    DEFAULT_MODEL: config.defaultModel,
    COMMISSION_BPS: String(config.commissionBps),
    SETTLE_ON_COMPLETION: String(config.settleOnCompletion),
    UNPROVEN_PAYER_MAX_USD: formatUsdcAtomic(config.exposure.unprovenPayerMaxAtomic),
    UNPROVEN_EXPOSURE_MAX_USD_PER_HOUR: formatUsd(config.exposure.unprovenHourlyMaxPicoUsd),
    BALANCE_MAX_AGE_MS: String(config.exposure.balanceMaxAgeMs),
    MIN_SETTLEMENT_USD: formatUsd(config.exposure.minSettlementPicoUsd),
    CHAIN_RPC_URL: chain.rpcUrl,
    CHAIN_ID: String(chain.chainId),
    USDC_ADDRESS: chain.usdcAddress,
    TREASURY_ADDRESS: chain.treasuryAddress,
    SESSION_KEY_PRIVATE_KEY: chain.sessionKeyPrivateKey,
    FACILITATOR_URL: chain.facilitatorUrl,
    CHAIN_POLL_INTERVAL_MS: String(chain.pollIntervalMs),
    RELAYER_MAX_FEE_PER_GAS_WEI: chain.maxFeePerGasWei?.toString(),
    RATE_LIMIT_MAX: String(limits.rateLimitMax),
    MAX_IN_FLIGHT_PER_PAYER: String(limits.maxInFlightPerPayer),
    IN_FLIGHT_SLOT_TTL_MS: limits.inFlightSlotTtlMs?.toString(),
    UPSTREAM_TIMEOUT_MS: String(limits.upstreamTimeoutMs),
    UPSTREAM_COMPLETION_TIMEOUT_MS: String(limits.upstreamCompletionTimeoutMs),
    UPSTREAM_CONNECT_TIMEOUT_MS: String(limits.upstreamConnectTimeoutMs),
    STREAM_HEARTBEAT_MS: String(limits.streamHeartbeatMs),
    STREAM_BUFFER_BUDGET_BYTES: String(limits.streamBufferBudgetBytes),
    COLLECTOR_IDLE_MS: String(limits.collectorIdleMs),
    COLLECTOR_INTERVAL_MS: String(limits.collectorIntervalMs),
    COLLECTOR_BATCH_SIZE: String(limits.collectorBatchSize),
    SETTLEMENT_TIMEOUT_MS: String(limits.settlementTimeoutMs),
    SETTLEMENT_BATCH_WAIT_MS: String(limits.settlementBatchWaitMs),
    DATABASE_QUERY_TIMEOUT_MS: limits.databaseQueryTimeoutMs?.toString(),
    SESSION_MIN_CAP_ATOMIC: limits.sessionMinCapAtomic.toString(),
  };
  if (chain.delegationEnvironment) {
    const file = join(dir, 'chain-environment.json');
    writeFileSync(file, JSON.stringify(chain.delegationEnvironment));
    env.CHAIN_ENVIRONMENT_FILE = file;
  }
  return Object.fromEntries(
    Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined),
  );
}
