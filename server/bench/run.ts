/**
 * `npm run bench`: the gateway's overhead and throughput, against calling the provider directly.
 *
 * Starts a local chain (0.2 s blocks), an Anthropic simulator that answers at once (own process) and
 * the gateway (`src/main.ts`, own process) on SQLite, then on PostgreSQL when DATABASE_URL names one.
 * Payers are real smart accounts with real sessions (POST /v1/authorize). A load generator in its own
 * process (bench/load.ts) drives a fixed number of connections, one payer per connection:
 *   - the simulator directly, then the gateway, non-streaming: requests per second, latency p50/p99;
 *   - for reference, a bare proxy on the gateway's HTTP stack (bench/bare-proxy.ts, same node flags):
 *     the ceiling of any Node.js proxy on this machine, and what the gateway's features cost;
 *   - the same streaming: time to the first byte of the answer;
 *   - long streamed answers (LONG_STREAM_EVENTS text events each, the simulator echoing a long
 *     prompt): streams per second and the gateway's CPU time per stream, i.e. per relayed event;
 *   - autocannon's requests per second on the same load;
 *   - one payer's sequential paid requests (each settles the previous one on chain) against
 *     sequential unpaid ones: the time a settlement adds.
 *   - the same with SETTLE_ON_COMPLETION=true (each debt settled as soon as its request completes),
 *     back to back and with a client's think time between requests (a gateway of its own, same database).
 *   - an x402 payer's sequential paid requests (each pays the previous one by an EIP-3009 proof);
 *   - the gas of every settlement those runs caused, from the receipts, per rail, a payer's first and
 *     later ones, and the request cost at which the commission pays a settlement's fee on Base
 *     (bench/settlement-gas.ts; its assumptions are printed with it);
 *   - the gas per payer of session settlements batched in one redeemDelegations, for 1, 5 and 12
 *     payers, each payer's first and a later one, and of x402 settlements (fresh EOAs' EIP-3009
 *     authorizations) sent alone or batched in one Multicall3 aggregate3 (bench/batched-gas.ts).
 * The "nothing owed" load uses a model priced at 0, so the JWT path runs in full (token, session,
 * debt check, usage record) while no settlement is due. Prints a table; writes bench-results/*.json.
 *
 * Each server measured first serves a warm-up load (BENCH_SERVER_WARMUP_SECONDS, 10; non-streaming, then
 * streaming), not measured: a fresh Node.js process compiles its hot code and collects its start-up
 * garbage during its first seconds of load, at about twice the CPU per request of a running one.
 *
 * Environment: BENCH_SECONDS (10), BENCH_WARMUP_SECONDS (2, dropped from each run's latencies),
 * BENCH_SERVER_WARMUP_SECONDS (10), BENCH_CONNECTIONS (10),
 * BENCH_PAID_REQUESTS (30), BENCH_LOG_LEVEL (info), COMMISSION_BPS (1000), BENCH_L2_GAS_PRICE_GWEI (0.01),
 * BENCH_L1_BASE_FEE_GWEI (1), BENCH_ETH_USD (3000), BENCH_RUNTIME (dist: built first with `npm run build`;
 * tsx), BENCH_GATEWAY_NODE_OPTIONS (node flags of the gateway; default: those of `npm run serve`, whose
 * environment the gateway gets too), BENCH_PROFILE_DIR (a CPU profile of the gateway), DATABASE_URL
 * (postgres://... for that mode).
 * The gateway's log goes to a file, as a deployment's would, not through this process.
 */

import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { x402Client } from '@x402/core/client';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { wrapFetchWithPayment } from '@x402/fetch';
import type { Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { createLocalChain, createPayerAccount, type LocalChain, mintUsdc } from '../devkit/chain/index.js';
import { authorizeWithSmartAccount } from '../src/client/index.js';
import { createTestDatabase } from '../test/support/db.js';
import {
  type BatchedGas,
  batchedSettlementGas,
  type X402BatchedGas,
  x402BatchedSettlementGas,
} from './batched-gas.js';
import { type LatencySummary, summarize } from './latency.js';
import type { LoadResult, Scenario, Target } from './load.js';
import {
  cpuMilliseconds,
  freePort,
  residentBytes,
  SERVER_DIR,
  serveCommand,
  startNode,
  startTs,
  type TsProcess,
  waitUntilUp,
} from './processes.js';
import {
  assumptionsLine,
  economics,
  onBase,
  type RailEconomics,
  type SettlementGas,
  settlementGas,
} from './settlement-gas.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 2);
const SERVER_WARMUP_SECONDS = Number(process.env.BENCH_SERVER_WARMUP_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const PAID_REQUESTS = Number(process.env.BENCH_PAID_REQUESTS ?? 30);
const LOG_LEVEL = process.env.BENCH_LOG_LEVEL ?? 'info';
/** When set, the gateway writes a V8 CPU profile there (for finding what the hot path spends). */
const PROFILE_DIR = process.env.BENCH_PROFILE_DIR;
/** `dist`: the compiled gateway (`npm run build`), as it runs in production; `tsx`: the sources. */
const RUNTIME = process.env.BENCH_RUNTIME === 'tsx' ? 'tsx' : 'dist';
/** The gateway runs as `npm run serve` runs it in production: that script's environment and node flags. */
const SERVE = serveCommand();
/** Node flags for the gateway instead of the serve script's (`BENCH_GATEWAY_NODE_OPTIONS=` for none). */
const GATEWAY_NODE_OPTIONS =
  process.env.BENCH_GATEWAY_NODE_OPTIONS?.split(/\s+/).filter(Boolean) ?? SERVE.nodeOptions;
const BLOCK_TIME_SECONDS = 0.2;
/** The gateway's commission, in basis points: what pays each settlement's gas. */
const COMMISSION_BPS = Number(process.env.COMMISSION_BPS ?? 1000);
/** An x402 payer's sequential requests: at least 3, so that besides its first settlement a later one is measured. */
const X402_REQUESTS = Math.max(3, PAID_REQUESTS);
/** A client's think time between two paid requests, in the settled-on-completion run: 1.5 blocks. */
const PAUSE_MS = 300;
/** Payers per batch whose settlements' gas is measured together. */
const BATCH_SIZES = [1, 5, 12] as const;

const FREE_MODEL = 'anthropic/bench-free';
const PAID_MODEL = 'anthropic/claude-sonnet-5.5';
const RESULTS_DIR = join(SERVER_DIR, '..', 'bench-results');

/** The project's targets, which the benchmark reports against (docs/performance.md). */
const TARGETS = {
  requestsPerSecond: 5_000,
  addedP50Ms: 1,
  addedP99Ms: 5,
  addedFirstByteP50Ms: 1,
  rssBytes: 150 * 1024 * 1024,
  paidAddedMs: BLOCK_TIME_SECONDS * 1000 + 20,
  /** Gas of a payer's later session settlement, the operator's target. */
  sessionLaterGas: 120_000,
  /** Gas per payer of later session settlements, 12 payers in one transaction. */
  batchedLaterGas: 90_000,
};

interface ModeResult extends Measured {
  mode: 'sqlite' | 'postgres';
  /** Gateway CPU time per non-streaming request: steadier than req/s on a machine doing other work. */
  cpuMsPerRequest: number;
  /** Gateway CPU time per long stream. */
  cpuMsPerLongStream: number;
  autocannon: LoadResult;
  rssBytes: number;
  /** V8 heap of the gateway after the run, from its /metrics: used (live and not yet collected) and total. */
  heap: { usedBytes: number; totalBytes: number };
  paid: LoadResult;
  unpaid: LoadResult;
  /** The paid path with SETTLE_ON_COMPLETION=true (each debt settled once its request completes). */
  onCompletion: { backToBack: LoadResult; paused: LoadResult };
  /** An x402 payer's sequential paid requests: their statuses. */
  x402: { statuses: number[] };
  /** Gas of the settlements of this mode's runs, from their receipts, and what they cost on Base. */
  settlementGas: { receipts: SettlementGas; economics: Record<keyof SettlementGas, RailEconomics> };
}

const anthropicHeaders = {
  'content-type': 'application/json',
  'x-api-key': 'bench',
  'anthropic-version': '2023-06-01',
};
const prompt = [{ role: 'user', content: 'hi' }];
/** The simulator echoes the prompt word by word: "echo:" and 199 words make 200 text events. */
const LONG_STREAM_EVENTS = 200;
const longPrompt = [
  { role: 'user', content: Array.from({ length: LONG_STREAM_EVENTS - 1 }, (_, i) => `w${i}`).join(' ') },
];

function load(scenario: Scenario): Promise<LoadResult> {
  return startTs('bench/load.ts', [JSON.stringify(scenario)]).result<LoadResult>();
}

const closedLoop = (target: Target, firstByte: boolean): Scenario => ({
  kind: 'closed-loop',
  target,
  connections: CONNECTIONS,
  seconds: SECONDS,
  warmupSeconds: WARMUP_SECONDS,
  firstByte,
});

/**
 * A server's warm-up before anything is measured: the closed-loop load for SERVER_WARMUP_SECONDS,
 * non-streaming then (when it streams) streaming; the results are discarded.
 */
async function warmUp(target: (stream: boolean) => Target, streams: boolean): Promise<void> {
  const seconds = streams ? SERVER_WARMUP_SECONDS / 2 : SERVER_WARMUP_SECONDS;
  if (seconds <= 0) return;
  const run = (stream: boolean) =>
    load({ ...closedLoop(target(stream), stream), seconds, warmupSeconds: 0 } as Scenario);
  await run(false);
  if (streams) await run(true);
}

/** One connection: what the gateway adds to a request when nothing queues behind the CPU. */
const oneAtATime = (target: Target, firstByte: boolean): Scenario =>
  ({
    ...closedLoop(target, firstByte),
    connections: 1,
    seconds: Math.max(1, SECONDS / 2),
  }) as Scenario;

/** The bare proxy's non-streaming load, and its CPU time per request. */
interface Floor {
  whole: LoadResult;
  cpuMsPerRequest: number;
}

interface Measured {
  whole: LoadResult;
  firstByte: LoadResult;
  /** Long streamed answers, read to their end. */
  longStream: LoadResult;
  /** The same with one connection. */
  serialWhole: LoadResult;
  serialFirstByte: LoadResult;
}

/** The shipped catalog plus a model priced at 0, served by the same simulator. */
function writeCatalog(dir: string): string {
  const shipped = JSON.parse(readFileSync(join(SERVER_DIR, 'src/catalog/models.json'), 'utf8'));
  const free = {
    id: FREE_MODEL,
    provider: 'anthropic',
    providerModel: 'claude-bench',
    name: 'Benchmark model (free)',
    contextLength: 200_000,
    maxOutputTokens: 8_192,
    pricing: { input: '0', output: '0' },
  };
  const path = join(dir, 'models.json');
  writeFileSync(path, JSON.stringify({ ...shipped, models: [...shipped.models, free] }));
  return path;
}

async function startGateway(
  local: LocalChain,
  simulatorUrl: string,
  dir: string,
  databaseUrl: string,
  extraEnv: Record<string, string> = {},
): Promise<{ url: string; process: TsProcess }> {
  const environmentFile = join(dir, 'chain-environment.json');
  writeFileSync(environmentFile, JSON.stringify({ environment: local.environment }));
  const port = await freePort();
  const env = {
    ...SERVE.env,
    PORT: String(port),
    HOST: '127.0.0.1',
    LOG_LEVEL,
    DATABASE_URL: databaseUrl,
    JWT_SECRET: randomBytes(32).toString('hex'),
    CHAIN_RPC_URL: local.rpcUrl,
    CHAIN_ID: String(local.chainId),
    USDC_ADDRESS: local.usdc,
    TREASURY_ADDRESS: local.accounts.treasury.address,
    SESSION_KEY_PRIVATE_KEY: local.accounts.gateway.privateKey,
    CHAIN_ENVIRONMENT_FILE: environmentFile,
    ANTHROPIC_API_KEY: 'bench',
    ANTHROPIC_BASE_URL: simulatorUrl,
    MODELS_FILE: writeCatalog(dir),
    // Rate limiting stays on, with a ceiling this load never reaches.
    RATE_LIMIT_MAX: '100000000',
    COMMISSION_BPS: String(COMMISSION_BPS),
    ...extraEnv,
  };
  const options = {
    env,
    nodeOptions: [
      ...GATEWAY_NODE_OPTIONS,
      ...(PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${PROFILE_DIR}`] : []),
    ],
    stdout: openSync(join(dir, 'gateway.log'), 'a'),
  };
  const gateway =
    RUNTIME === 'dist' ? startNode(['dist/main.js'], [], options) : startTs('src/main.ts', [], options);
  const url = `http://127.0.0.1:${port}`;
  await waitUntilUp(`${url}/v1/models`);
  return { url, process: gateway };
}

/** Smart accounts of one owner (a salt each), deployed and funded; each gets a session on `gatewayUrl`. */
async function authorizedTokens(
  local: LocalChain,
  gatewayUrl: string,
  count: number,
  saltBase: number,
): Promise<string[]> {
  const owner = local.accounts.payers[0]?.privateKey as Hex;
  const tokens: string[] = [];
  for (let i = 0; i < count; i++) {
    const payer = await createPayerAccount(local, owner, {
      deploySalt: `0x${(saltBase + i).toString(16).padStart(4, '0')}`,
      fundUsdc: 100_000_000n,
    });
    const session = await authorizeWithSmartAccount({
      gatewayUrl,
      smartAccount: payer.account,
      cap: 50_000_000n,
      expiresAt: new Date(Date.now() + 86_400_000),
    });
    tokens.push(session.token);
  }
  return tokens;
}

async function benchMode(
  mode: ModeResult['mode'],
  local: LocalChain,
  simulatorUrl: string,
  databaseUrl: string,
  saltBase: number,
): Promise<ModeResult> {
  const dir = mkdtempSync(join(tmpdir(), `paygate-bench-${mode}-`));
  const fromBlock = await local.publicClient.getBlockNumber();
  try {
    const measured = await measureGateway(
      mode,
      local,
      await startGateway(local, simulatorUrl, dir, databaseUrl),
      saltBase,
    );
    console.error(
      `[${mode}] paid path settled on completion: ${PAID_REQUESTS} back to back, then ${PAUSE_MS} ms apart`,
    );
    const onCompletion = await measureSettleOnCompletion(
      local,
      await startGateway(local, simulatorUrl, dir, databaseUrl, { SETTLE_ON_COMPLETION: 'true' }),
      saltBase + CONNECTIONS + 2,
    );
    const receipts = await settlementGas(
      local,
      local.accounts.gateway.address,
      fromBlock,
      await local.publicClient.getBlockNumber(),
    );
    return {
      ...measured,
      onCompletion,
      settlementGas: { receipts, economics: economics(receipts, COMMISSION_BPS) },
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const chatTarget =
  (gatewayUrl: string) =>
  (model: string, stream: boolean, payers: string[], long = false): Target => ({
    url: gatewayUrl,
    path: '/v1/chat/completions',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, ...chatBody(stream, long) }),
    tokens: payers,
  });

/** The prompt and bound of a request, short or long (LONG_STREAM_EVENTS events when streamed). */
const chatBody = (stream: boolean, long: boolean) => ({
  messages: long ? longPrompt : prompt,
  max_tokens: long ? LONG_STREAM_EVENTS + 16 : 16,
  stream,
});

/** The gateway as deployed by default: load with nothing owed, then the paid path settled on arrival. */
async function measureGateway(
  mode: ModeResult['mode'],
  local: LocalChain,
  gateway: { url: string; process: TsProcess },
  saltBase: number,
): Promise<Omit<ModeResult, 'onCompletion' | 'settlementGas'>> {
  try {
    console.error(`[${mode}] gateway up at ${gateway.url}; authorizing ${CONNECTIONS + 2} payers`);
    const tokens = await authorizedTokens(local, gateway.url, CONNECTIONS + 2, saltBase);
    const chat = chatTarget(gateway.url);
    const perConnection = tokens.slice(0, CONNECTIONS);
    console.error(`[${mode}] warm-up: ${SERVER_WARMUP_SECONDS} s of load, not measured`);
    await warmUp((stream) => chat(FREE_MODEL, stream, perConnection), true);
    console.error(`[${mode}] non-streaming load`);
    const pid = gateway.process.child.pid as number;
    const cpuBefore = await cpuMilliseconds(pid);
    const whole = await load(closedLoop(chat(FREE_MODEL, false, perConnection), false));
    const cpuMsPerRequest = ((await cpuMilliseconds(pid)) - cpuBefore) / whole.sent;
    console.error(`[${mode}] streaming load (first byte)`);
    const firstByte = await load(closedLoop(chat(FREE_MODEL, true, perConnection), true));
    console.error(`[${mode}] long streams (${LONG_STREAM_EVENTS} events each)`);
    const cpuBeforeLong = await cpuMilliseconds(pid);
    const longStream = await load(closedLoop(chat(FREE_MODEL, true, perConnection, true), false));
    const cpuMsPerLongStream = ((await cpuMilliseconds(pid)) - cpuBeforeLong) / longStream.sent;
    console.error(`[${mode}] one connection`);
    const serialWhole = await load(oneAtATime(chat(FREE_MODEL, false, perConnection), false));
    const serialFirstByte = await load(oneAtATime(chat(FREE_MODEL, true, perConnection), true));
    console.error(`[${mode}] autocannon`);
    const autocannon = await load({
      kind: 'autocannon',
      target: chat(FREE_MODEL, false, perConnection),
      connections: CONNECTIONS,
      seconds: SECONDS,
    });
    const rssBytes = await residentBytes(pid);
    const heap = await heapOf(gateway.url);
    console.error(`[${mode}] paid path: ${PAID_REQUESTS} sequential paid requests, then as many unpaid`);
    const paid = await load({
      kind: 'sequential',
      target: chat(PAID_MODEL, false, [tokens[CONNECTIONS] as string]),
      count: PAID_REQUESTS,
    });
    const unpaid = await load({
      kind: 'sequential',
      target: chat(FREE_MODEL, false, [tokens[CONNECTIONS + 1] as string]),
      count: PAID_REQUESTS,
    });
    console.error(`[${mode}] x402: ${X402_REQUESTS} sequential paid requests of one payer`);
    const x402 = await x402Payments(local, gateway.url);
    return {
      mode,
      whole,
      cpuMsPerRequest,
      firstByte,
      longStream,
      cpuMsPerLongStream,
      serialWhole,
      serialFirstByte,
      autocannon,
      rssBytes,
      heap,
      paid,
      unpaid,
      x402,
    };
  } finally {
    await gateway.process.stop();
  }
}

/**
 * A fresh EOA paying by x402 as a stock client does (`@x402/fetch`, wrapped twice: a payer with debt is
 * asked 0, which names it, then what it owes): each request after the first pays the one before.
 */
async function x402Payments(local: LocalChain, gatewayUrl: string): Promise<ModeResult['x402']> {
  const payer = privateKeyToAccount(generatePrivateKey());
  await mintUsdc(local, payer.address, 100_000_000n);
  const client = new x402Client();
  registerExactEvmScheme(client, { signer: payer });
  client.setSpendControls({ allowedAssets: [{ network: `eip155:${local.chainId}`, asset: local.usdc }] });
  const pay = wrapFetchWithPayment(wrapFetchWithPayment(fetch, client), client);
  const statuses: number[] = [];
  for (let i = 0; i < X402_REQUESTS; i++) {
    const response = await pay(`${gatewayUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: PAID_MODEL, ...chatBody(false, false) }),
    });
    await response.arrayBuffer();
    statuses.push(response.status);
  }
  return { statuses };
}

/** SETTLE_ON_COMPLETION=true: one payer's paid requests back to back, then with a client's think time. */
async function measureSettleOnCompletion(
  local: LocalChain,
  gateway: { url: string; process: TsProcess },
  saltBase: number,
): Promise<ModeResult['onCompletion']> {
  try {
    const [token] = await authorizedTokens(local, gateway.url, 1, saltBase);
    const target = chatTarget(gateway.url)(PAID_MODEL, false, [token as string]);
    return {
      backToBack: await load({ kind: 'sequential', target, count: PAID_REQUESTS }),
      paused: await load({ kind: 'sequential', target, count: PAID_REQUESTS, pauseMs: PAUSE_MS }),
    };
  } finally {
    await gateway.process.stop();
  }
}

/** The same non-streaming load through the bare proxy (bench/bare-proxy.ts), run as the gateway runs. */
async function benchBareProxy(target: (stream: boolean) => Target): Promise<Floor> {
  const proxy = startTs('bench/bare-proxy.ts', [target(false).url], {
    env: SERVE.env,
    nodeOptions: GATEWAY_NODE_OPTIONS,
  });
  try {
    const { url } = await proxy.firstJson<{ url: string }>();
    await warmUp(() => ({ ...target(false), url }), false);
    const pid = proxy.child.pid as number;
    const cpuBefore = await cpuMilliseconds(pid);
    const whole = await load(closedLoop({ ...target(false), url }, false));
    return { whole, cpuMsPerRequest: ((await cpuMilliseconds(pid)) - cpuBefore) / whole.sent };
  } finally {
    await proxy.stop();
  }
}

/** The gateway's own view of its heap, from /metrics (served to loopback callers). */
async function heapOf(gatewayUrl: string): Promise<ModeResult['heap']> {
  const text = await (await fetch(`${gatewayUrl}/metrics`)).text();
  const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]);
  return {
    usedBytes: value('nodejs_heap_size_used_bytes'),
    totalBytes: value('nodejs_heap_size_total_bytes'),
  };
}

const ms = (value: number) => (Number.isFinite(value) ? value.toFixed(value < 10 ? 3 : 1) : 'n/a');
const added = (gateway: LatencySummary | undefined, direct: LatencySummary | undefined, key: 'p50' | 'p99') =>
  (gateway?.[key] ?? Number.NaN) - (direct?.[key] ?? Number.NaN);
const mark = (ok: boolean) => (ok ? 'ok' : 'MISSED');

function settledOnly(result: LoadResult): LatencySummary | undefined {
  const settled = result.samples
    ?.filter((sample) => sample.settled && sample.status === 200)
    .map((sample) => sample.ms);
  return settled?.length ? summarize(settled) : undefined;
}

/** Every answered request after the first (which owed nothing), settled in it or before it. */
function afterFirst(result: LoadResult): LatencySummary | undefined {
  const answered = result.samples
    ?.slice(1)
    .filter((sample) => sample.status === 200)
    .map((sample) => sample.ms);
  return answered?.length ? summarize(answered) : undefined;
}

function report(direct: Measured & { autocannon: LoadResult }, floor: Floor, modes: ModeResult[]) {
  const rows: string[][] = [
    ['', 'direct', 'bare proxy', ...modes.flatMap((m) => [`gateway ${m.mode}`, 'added', 'target'])],
  ];
  const row = (
    label: string,
    directCell: string,
    cells: (m: ModeResult) => [string, string, string],
    floorCell = '',
  ) => rows.push([label, directCell, floorCell, ...modes.flatMap(cells)]);
  const floorLatency = (key: 'p50' | 'p99') =>
    `${ms(floor.whole.latency?.[key] ?? Number.NaN)} (+${ms(added(floor.whole.latency, direct.whole.latency, key))})`;
  row(
    'req/s, closed loop',
    direct.whole.requestsPerSecond.toFixed(0),
    (m) => [
      m.whole.requestsPerSecond.toFixed(0),
      '',
      `>= ${TARGETS.requestsPerSecond} ${mark(m.whole.requestsPerSecond >= TARGETS.requestsPerSecond)}`,
    ],
    floor.whole.requestsPerSecond.toFixed(0),
  );
  row('req/s, autocannon', direct.autocannon.requestsPerSecond.toFixed(0), (m) => [
    m.autocannon.requestsPerSecond.toFixed(0),
    '',
    `>= ${TARGETS.requestsPerSecond} ${mark(m.autocannon.requestsPerSecond >= TARGETS.requestsPerSecond)}`,
  ]);
  for (const key of ['p50', 'p99'] as const) {
    const limit = key === 'p50' ? TARGETS.addedP50Ms : TARGETS.addedP99Ms;
    row(
      `latency ${key} ms`,
      ms(direct.whole.latency?.[key] ?? Number.NaN),
      (m) => {
        const extra = added(m.whole.latency, direct.whole.latency, key);
        return [ms(m.whole.latency?.[key] ?? Number.NaN), ms(extra), `< ${limit} ${mark(extra < limit)}`];
      },
      floorLatency(key),
    );
  }
  for (const key of ['p50', 'p99'] as const)
    row(`first byte ${key} ms`, ms(direct.firstByte.latency?.[key] ?? Number.NaN), (m) => {
      const extra = added(m.firstByte.latency, direct.firstByte.latency, key);
      return [
        ms(m.firstByte.latency?.[key] ?? Number.NaN),
        ms(extra),
        key === 'p50' ? `< ${TARGETS.addedFirstByteP50Ms} ${mark(extra < TARGETS.addedFirstByteP50Ms)}` : '',
      ];
    });
  for (const [label, pick] of [
    ['1 conn: latency', (r: Measured) => r.serialWhole],
    ['1 conn: first byte', (r: Measured) => r.serialFirstByte],
  ] as const)
    for (const key of ['p50', 'p99'] as const)
      row(`${label} ${key} ms`, ms(pick(direct).latency?.[key] ?? Number.NaN), (m) => [
        ms(pick(m).latency?.[key] ?? Number.NaN),
        ms(added(pick(m).latency, pick(direct).latency, key)),
        '',
      ]);
  row(
    `long streams (${LONG_STREAM_EVENTS} events)/s`,
    direct.longStream.requestsPerSecond.toFixed(0),
    (m) => [m.longStream.requestsPerSecond.toFixed(0), '', ''],
  );
  row('CPU ms/long stream', '', (m) => [
    ms(m.cpuMsPerLongStream),
    `${((m.cpuMsPerLongStream * 1000) / LONG_STREAM_EVENTS).toFixed(1)} us/event`,
    '',
  ]);
  row(
    'CPU ms/request',
    '',
    // In bare proxies: steadier from day to day than milliseconds, as the machine's speed varies.
    (m) => [
      ms(m.cpuMsPerRequest),
      `${(m.cpuMsPerRequest / floor.cpuMsPerRequest).toFixed(1)} bare proxies`,
      `<= 0.2 for 5000/s on a core`,
    ],
    ms(floor.cpuMsPerRequest),
  );
  const failures = (r: Measured) =>
    r.whole.failures +
    r.firstByte.failures +
    r.longStream.failures +
    r.serialWhole.failures +
    r.serialFirstByte.failures;
  row('failed requests', String(failures(direct)), (m) => [
    String(failures(m) + m.autocannon.failures),
    '',
    '0',
  ]);
  row('gateway RSS after, MB', '', (m) => [
    (m.rssBytes / 1024 / 1024).toFixed(0),
    '',
    `< 150 ${mark(m.rssBytes < TARGETS.rssBytes)}`,
  ]);
  row('gateway heap used/total, MB', '', (m) => [
    `${(m.heap.usedBytes / 1024 / 1024).toFixed(0)}/${(m.heap.totalBytes / 1024 / 1024).toFixed(0)}`,
    '',
    '',
  ]);
  for (const key of ['p50', 'p99'] as const)
    row(`paid request ${key} ms`, '', (m) => {
      const settled = settledOnly(m.paid);
      const extra = added(settled, m.unpaid.latency, key);
      return [
        `${ms(settled?.[key] ?? Number.NaN)} (unpaid ${ms(m.unpaid.latency?.[key] ?? Number.NaN)})`,
        ms(extra),
        key === 'p50' ? `<= ${TARGETS.paidAddedMs} ${mark(extra <= TARGETS.paidAddedMs)}` : '',
      ];
    });
  for (const [label, pick] of [
    ['paid, settled on completion, back to back', (m: ModeResult) => m.onCompletion.backToBack],
    [`paid, settled on completion, ${PAUSE_MS} ms apart`, (m: ModeResult) => m.onCompletion.paused],
  ] as const)
    for (const key of ['p50', 'p99'] as const)
      row(`${label} ${key} ms`, '', (m) => {
        const paid = afterFirst(pick(m));
        const extra = added(paid, m.unpaid.latency, key);
        return [
          ms(paid?.[key] ?? Number.NaN),
          ms(extra),
          key === 'p50' ? `<= ${TARGETS.paidAddedMs} ${mark(extra <= TARGETS.paidAddedMs)}` : '',
        ];
      });
  const gasCell = (value: number | undefined) => value?.toString() ?? 'n/a';
  for (const rail of ['session', 'x402'] as const) {
    row(`gas/settlement ${rail}: first, later`, '', (m) => {
      const { gas, settlements } = m.settlementGas.economics[rail];
      return [
        `${gasCell(gas.first)}, ${gasCell(gas.later)}`,
        `${settlements.first}+${settlements.later} receipts`,
        rail === 'session' && gas.later !== undefined
          ? `later <= ${TARGETS.sessionLaterGas} ${mark(gas.later <= TARGETS.sessionLaterGas)}`
          : '',
      ];
    });
    row(`break-even ${rail}: request cost USD`, '', (m) => {
      const { feeUsd, breakEven } = m.settlementGas.economics[rail];
      return [
        breakEven ? breakEven.requestCostUsd.toFixed(4) : 'n/a',
        feeUsd === undefined ? '' : `fee ${feeUsd.toFixed(5)} USD`,
        '',
      ];
    });
  }
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((cells) => (cells[column] ?? '').length)));
  for (const cells of rows)
    console.log(cells.map((cell, column) => cell.padEnd(widths[column] ?? 0)).join('  '));
}

/**
 * Gas per payer settlement in batches, what it costs on Base: session (a payer's first and a later
 * one; the fee of a later one), then x402 (against one sent alone).
 */
function reportBatches(batched: BatchedGas[], x402: X402BatchedGas[]) {
  console.log(
    `\nsession settlements batched in one redeemDelegations (the client's caveat set), gas per payer: first, later; a later one on Base (target: ${TARGETS.batchedLaterGas} at 12 payers)`,
  );
  for (const { payers, first, later, calldataBytes } of batched) {
    const { feeUsd, breakEven } = onBase(later, calldataBytes, COMMISSION_BPS);
    const target = payers === 12 ? ` ${mark(later <= TARGETS.batchedLaterGas)}` : '';
    console.log(
      `  ${String(payers).padStart(2)} payer${payers === 1 ? '' : 's'}: ${first}, ${later}${target}  fee ${feeUsd.toFixed(5)} USD, break-even request cost ${breakEven.requestCostUsd.toFixed(4)} USD`,
    );
  }
  console.log(
    '\nx402 settlements (fresh EOAs, EIP-3009) alone or batched in one Multicall3 aggregate3 (allowFailure, as the gateway sends them), gas per payer',
  );
  const alone = x402.find((batch) => batch.payers === 1)?.gas;
  for (const { payers, gas, calldataBytes } of x402) {
    const { feeUsd, breakEven } = onBase(gas, calldataBytes, COMMISSION_BPS);
    const saved =
      alone && payers > 1 ? ` (${(((alone - gas) / alone) * 100).toFixed(0)}% less than alone)` : '';
    console.log(
      `  ${String(payers).padStart(2)} payer${payers === 1 ? '' : 's'}: ${gas}${saved}  fee ${feeUsd.toFixed(5)} USD, break-even request cost ${breakEven.requestCostUsd.toFixed(4)} USD`,
    );
  }
}

async function main() {
  console.error(
    `bench: ${CONNECTIONS} connections, ${SECONDS} s per run (+${WARMUP_SECONDS} s warm-up; ${SERVER_WARMUP_SECONDS} s of load warms each server first), ${cpus().length} CPUs, gateway from ${RUNTIME}`,
  );
  if (RUNTIME === 'dist') {
    console.error('building the gateway (npm run build)');
    execFileSync('npm', ['run', 'build'], { cwd: SERVER_DIR, stdio: ['ignore', 'ignore', 'inherit'] });
  }
  const local = await createLocalChain({ blockTime: BLOCK_TIME_SECONDS });
  const simulator = startTs('bench/simulator.ts');
  try {
    const { url: simulatorUrl } = await simulator.firstJson<{ url: string }>();
    const directTarget = (stream: boolean, long = false): Target => ({
      url: simulatorUrl,
      path: '/v1/messages',
      headers: anthropicHeaders,
      body: JSON.stringify({ model: 'claude-bench', ...chatBody(stream, long) }),
    });
    console.error('[direct] warm-up, then non-streaming, streaming, autocannon');
    await warmUp(directTarget, true);
    const direct = {
      whole: await load(closedLoop(directTarget(false), false)),
      firstByte: await load(closedLoop(directTarget(true), true)),
      longStream: await load(closedLoop(directTarget(true, true), false)),
      serialWhole: await load(oneAtATime(directTarget(false), false)),
      serialFirstByte: await load(oneAtATime(directTarget(true), true)),
      autocannon: await load({
        kind: 'autocannon',
        target: directTarget(false),
        connections: CONNECTIONS,
        seconds: SECONDS,
      }),
    };
    console.error('[bare proxy] non-streaming');
    const floor = await benchBareProxy(directTarget);
    const modes: ModeResult[] = [];
    const sqliteDir = mkdtempSync(join(tmpdir(), 'paygate-bench-db-'));
    try {
      modes.push(await benchMode('sqlite', local, simulatorUrl, join(sqliteDir, 'gateway.sqlite'), 0));
    } finally {
      rmSync(sqliteDir, { recursive: true, force: true });
    }
    let postgresNote: string | undefined;
    const databaseUrl = process.env.DATABASE_URL;
    if (databaseUrl?.startsWith('postgres')) {
      // A schema of its own in that database, dropped afterwards.
      const schema = await createTestDatabase('postgres');
      try {
        modes.push(await benchMode('postgres', local, simulatorUrl, schema.url, 100));
      } finally {
        await schema.drop();
      }
    } else {
      postgresNote = 'PostgreSQL mode skipped: DATABASE_URL does not name a postgres:// database';
      console.error(postgresNote);
    }

    console.error(
      `[batches] ${BATCH_SIZES.join(', ')} payers' settlements in one redeemDelegations, then in one aggregate3 (x402)`,
    );
    const batched = await batchedSettlementGas(local, BATCH_SIZES);
    const x402Batched = await x402BatchedSettlementGas(local, BATCH_SIZES);

    console.log('');
    report(direct, floor, modes);
    reportBatches(batched, x402Batched);
    console.log(
      `\nsettlement gas: medians of the receipts; break-even = the request cost (commission included) whose commission pays one settlement's fee on Base, ${assumptionsLine(COMMISSION_BPS)}`,
    );
    if (postgresNote) console.log(`\n${postgresNote}`);
    mkdirSync(RESULTS_DIR, { recursive: true });
    const file = join(RESULTS_DIR, `bench-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
    writeFileSync(
      file,
      `${JSON.stringify(
        {
          at: new Date().toISOString(),
          machine: { cpus: cpus().length, model: cpus()[0]?.model, node: process.version },
          settings: {
            seconds: SECONDS,
            warmupSeconds: WARMUP_SECONDS,
            serverWarmupSeconds: SERVER_WARMUP_SECONDS,
            connections: CONNECTIONS,
            paidRequests: PAID_REQUESTS,
            logLevel: LOG_LEVEL,
            runtime: RUNTIME,
            gatewayNodeOptions: GATEWAY_NODE_OPTIONS,
            gatewayEnvironment: SERVE.env,
            blockTimeSeconds: BLOCK_TIME_SECONDS,
            commissionBps: COMMISSION_BPS,
            baseFeeAssumptions: assumptionsLine(COMMISSION_BPS),
          },
          targets: TARGETS,
          direct,
          bareProxy: floor,
          modes: modes.map((m) => ({ ...m, paidSettled: settledOnly(m.paid) })),
          batchedSettlementGas: batched,
          x402BatchedSettlementGas: x402Batched,
          postgres: postgresNote ?? 'measured',
        },
        null,
        2,
      )}\n`,
    );
    console.log(`\nresults: ${file}`);
  } finally {
    await simulator.stop();
    await local.stop();
  }
}

await main();
