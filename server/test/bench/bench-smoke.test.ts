import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, expect, test } from 'vitest';

// `npm run bench` end to end with its smallest settings, on SQLite only: it runs, exits 0 and writes
// its results. Only that it works: no timing target is checked (they depend on the machine).
const SERVER_DIR = fileURLToPath(new URL('../..', import.meta.url));
/** The bench takes about 30 s so; past this, its whole process group is killed. */
const KILL_AFTER_MS = 150_000;

let bench: ChildProcess | undefined;
let resultsFile: string | undefined;

/** SIGKILL to the bench's process group: npm, tsx, the bench and every process it started. */
function killGroup(): void {
  if (!bench?.pid || bench.exitCode !== null || bench.signalCode !== null) return;
  try {
    process.kill(-bench.pid, 'SIGKILL');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

afterAll(() => {
  killGroup();
  // The bench writes into the repository's bench-results/ (ignored by git): this run's file goes.
  if (resultsFile) rmSync(resultsFile, { force: true });
});

interface LoadResult {
  requests: number;
  sent: number;
  failures: number;
  statusCodes: Record<string, number>;
  latency?: { p50: number; p99: number };
  samples?: Array<{ ms: number; settled: boolean; status: number }>;
}

/** A closed-loop or autocannon run: it sent requests, and every one was answered 200. */
function expectLoadRan(result: LoadResult, name: string): void {
  expect(result.requests, name).toBeGreaterThan(0);
  expect(result.sent, name).toBeGreaterThanOrEqual(result.requests);
  expect(result.failures, name).toBe(0);
  // autocannon counts by class (2xx), the bench's own loads by status.
  for (const status of Object.keys(result.statusCodes)) expect(status, name).toMatch(/^2(00|xx)$/);
}

function expectLatencies(result: LoadResult, name: string): void {
  expect(Number.isFinite(result.latency?.p50), name).toBe(true);
  expect(Number.isFinite(result.latency?.p99), name).toBe(true);
}

/** One payer's sequential requests: `count` of them, all answered 200. */
function expectSequential(result: LoadResult, count: number, name: string): void {
  expect(
    result.samples?.map((sample) => sample.status),
    name,
  ).toEqual(Array(count).fill(200));
  expect(result.failures, name).toBe(0);
}

test('npm run bench with the smallest settings: exits 0, prints its table, writes its JSON', {
  timeout: KILL_AFTER_MS + 20_000,
}, async () => {
  // Exactly this environment (no DATABASE_URL: the PostgreSQL mode is skipped; tsx: no build).
  const env = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    DO_NOT_TRACK: '1',
    BENCH_SECONDS: '1',
    BENCH_WARMUP_SECONDS: '0',
    BENCH_SERVER_WARMUP_SECONDS: '0',
    BENCH_CONNECTIONS: '1',
    BENCH_PAID_REQUESTS: '2',
    BENCH_RUNTIME: 'tsx',
  };
  const started = Date.now();
  // A process group of its own, so that a timeout can end all of it.
  bench = spawn('npm', ['run', 'bench'], {
    cwd: SERVER_DIR,
    env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  bench.stdout?.on('data', (chunk) => {
    stdout += chunk;
  });
  bench.stderr?.on('data', (chunk) => {
    stderr = (stderr + chunk).slice(-8_000);
  });
  const exited = once(bench, 'exit');
  const timer = setTimeout(killGroup, KILL_AFTER_MS);
  let code: unknown;
  try {
    [code] = await exited;
  } finally {
    clearTimeout(timer);
  }
  resultsFile = /^results: (.+\.json)$/m.exec(stdout)?.[1];
  expect(code, `exit after ${Date.now() - started} ms; stderr: ${stderr}`).toBe(0);
  expect(stdout).toContain('PostgreSQL mode skipped');
  // The table's row: direct, then the gateway on SQLite, then its target.
  expect(stdout).toMatch(/^failed requests +0 +0 +0 *$/m);

  expect(resultsFile).toBeDefined();
  const results = JSON.parse(readFileSync(resultsFile as string, 'utf8'));
  expect(Object.keys(results).sort()).toEqual(
    [
      'at',
      'bareProxy',
      'batchedSettlementGas',
      'direct',
      'machine',
      'modes',
      'postgres',
      'settings',
      'targets',
      'x402BatchedSettlementGas',
    ].sort(),
  );
  expect(results.settings).toMatchObject({
    seconds: 1,
    warmupSeconds: 0,
    serverWarmupSeconds: 0,
    connections: 1,
    paidRequests: 2,
    runtime: 'tsx',
  });
  expect(results.postgres).toMatch(/^PostgreSQL mode skipped/);

  for (const [name, result] of Object.entries(results.direct as Record<string, LoadResult>)) {
    expectLoadRan(result, `direct.${name}`);
    if (name !== 'autocannon') expectLatencies(result, `direct.${name}`);
  }
  expectLoadRan(results.bareProxy.whole, 'bareProxy.whole');
  expect(results.bareProxy.cpuMsPerRequest).toBeGreaterThan(0);

  expect(results.modes.map((mode: { mode: string }) => mode.mode)).toEqual(['sqlite']);
  const [sqlite] = results.modes;
  for (const name of ['whole', 'firstByte', 'longStream', 'serialWhole', 'serialFirstByte']) {
    expectLoadRan(sqlite[name], `sqlite.${name}`);
    expectLatencies(sqlite[name], `sqlite.${name}`);
  }
  expectLoadRan(sqlite.autocannon, 'sqlite.autocannon');
  expect(sqlite.cpuMsPerRequest).toBeGreaterThan(0);
  expect(sqlite.cpuMsPerLongStream).toBeGreaterThan(0);
  expect(sqlite.rssBytes).toBeGreaterThan(0);
  expect(sqlite.heap.usedBytes).toBeGreaterThan(0);
  expect(sqlite.heap.totalBytes).toBeGreaterThanOrEqual(sqlite.heap.usedBytes);
  expectSequential(sqlite.unpaid, 2, 'sqlite.unpaid');
  expectSequential(sqlite.paid, 2, 'sqlite.paid');
  // The second paid request settled the first one's debt on chain before it went out.
  expect(sqlite.paid.samples.map((sample: { settled: boolean }) => sample.settled)).toEqual([false, true]);
  expect(Number.isFinite(sqlite.paidSettled?.p50)).toBe(true);
  expectSequential(sqlite.onCompletion.backToBack, 2, 'sqlite.onCompletion.backToBack');
  expectSequential(sqlite.onCompletion.paused, 2, 'sqlite.onCompletion.paused');

  // Every settlement those runs caused, read from its receipt: each rail, a payer's first and later ones.
  expect(sqlite.x402.statuses).toEqual([200, 200, 200]);
  for (const rail of ['session', 'x402']) {
    const { gas, settlements, breakEven } = sqlite.settlementGas.economics[rail];
    expect(settlements.first, rail).toBeGreaterThan(0);
    expect(settlements.later, rail).toBeGreaterThan(0);
    expect(gas.first, rail).toBeGreaterThan(21_000);
    expect(gas.later, rail).toBeGreaterThan(21_000);
    expect(breakEven.requestCostUsd, rail).toBeGreaterThan(0);
    expect(stdout).toMatch(
      new RegExp(`^gas/settlement ${rail}: first, later +${gas.first}, ${gas.later} `, 'm'),
    );
  }
  // Batches of 1, 5 and 12 payers in one redeemDelegations: a batch's gas per payer falls with its size.
  const batched = results.batchedSettlementGas as Array<{ payers: number; first: number; later: number }>;
  expect(batched.map((batch) => batch.payers)).toEqual([1, 5, 12]);
  for (const { payers, first, later } of batched) {
    expect(later, `${payers} payers`).toBeGreaterThan(21_000);
    expect(later, `${payers} payers`).toBeLessThan(first);
    expect(stdout).toMatch(new RegExp(`^ +${payers} payers?: +${first}, ${later}`, 'm'));
  }
  expect(batched[2]?.later).toBeLessThan(batched[0]?.later ?? 0);
  // x402 settlements of 1 (alone), 5 and 12 payers in one aggregate3: gas per payer falls with the size.
  const x402 = results.x402BatchedSettlementGas as Array<{ payers: number; gas: number }>;
  expect(x402.map((batch) => batch.payers)).toEqual([1, 5, 12]);
  for (const { payers, gas } of x402) {
    expect(gas, `x402, ${payers} payers`).toBeGreaterThan(21_000);
    expect(stdout).toMatch(new RegExp(`^ +${payers} payers?: +${gas}[ (].* break-even request cost`, 'm'));
  }
  expect(x402[1]?.gas).toBeLessThan(x402[0]?.gas ?? 0);
  expect(x402[2]?.gas).toBeLessThan(x402[1]?.gas ?? 0);
  expect(stdout).toMatch(/^settlement gas: .*assumed for Base: L2 gas 0\.01 gwei.*ETH \$3000/m);
});
