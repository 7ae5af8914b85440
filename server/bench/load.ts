/**
 * The benchmark's load generator, run as a process of its own. One scenario per run, given as JSON
 * in argv[2]; prints the result as JSON on the last line of stdout.
 *
 * - `closed-loop`: `connections` clients each send the next request as soon as the previous one
 *   ended, for `seconds` (after `warmupSeconds`), on a keep-alive pool. Latency is measured with
 *   performance.now() (microsecond precision: autocannon's histograms count whole milliseconds),
 *   to the end of the body, or to its first byte (`firstByte`, for streams).
 * - `autocannon`: the same load through autocannon, for its requests per second.
 * - `sequential`: `count` requests one after the other (one payer's paid path), with the headers
 *   that say whether the request settled a debt first; `pauseMs` apart (a client's think time).
 */
import autocannon from 'autocannon';
import { Pool } from 'undici';
import { type LatencySummary, summarize } from './latency.js';

export interface Target {
  url: string;
  path: string;
  headers: Record<string, string>;
  body: string;
  /** One Authorization bearer per connection (a payer per connection), when the target needs them. */
  tokens?: string[];
}

export type Scenario =
  | {
      kind: 'closed-loop';
      target: Target;
      connections: number;
      seconds: number;
      warmupSeconds: number;
      firstByte: boolean;
    }
  | { kind: 'autocannon'; target: Target; connections: number; seconds: number }
  | { kind: 'sequential'; target: Target; count: number; pauseMs?: number };

export interface LoadResult {
  /** Requests measured (after the warm-up). */
  requests: number;
  /** Every request sent, the warm-up's included (for CPU time per request). */
  sent: number;
  requestsPerSecond: number;
  /** Answers other than 200, and transport errors. */
  failures: number;
  statusCodes: Record<string, number>;
  latency?: LatencySummary;
  /** sequential: each request's latency (ms) and whether it settled a debt (x-settlement-tx). */
  samples?: Array<{ ms: number; settled: boolean; status: number }>;
}

function headersFor(target: Target, connection: number): Record<string, string> {
  const token = target.tokens?.[connection % target.tokens.length];
  return token ? { ...target.headers, authorization: `Bearer ${token}` } : target.headers;
}

async function closedLoop(scenario: Extract<Scenario, { kind: 'closed-loop' }>): Promise<LoadResult> {
  const { target } = scenario;
  const pool = new Pool(target.url, { connections: scenario.connections, pipelining: 1 });
  const latencies: number[] = [];
  const statusCodes: Record<string, number> = {};
  let failures = 0;
  let sent = 0;
  const start = performance.now();
  const measureFrom = start + scenario.warmupSeconds * 1000;
  const end = measureFrom + scenario.seconds * 1000;
  const client = async (connection: number) => {
    const headers = headersFor(target, connection);
    for (let now = performance.now(); now < end; now = performance.now()) {
      sent++;
      const startedAt = performance.now();
      let status = 0;
      let elapsed = Number.NaN;
      try {
        const res = await pool.request({ method: 'POST', path: target.path, headers, body: target.body });
        status = res.statusCode;
        for await (const _chunk of res.body) {
          if (scenario.firstByte && Number.isNaN(elapsed)) elapsed = performance.now() - startedAt;
        }
        if (!scenario.firstByte) elapsed = performance.now() - startedAt;
      } catch {
        status = 0;
      }
      if (startedAt < measureFrom) continue;
      statusCodes[status] = (statusCodes[status] ?? 0) + 1;
      if (status === 200 && !Number.isNaN(elapsed)) latencies.push(elapsed);
      else failures++;
    }
  };
  await Promise.all(Array.from({ length: scenario.connections }, (_, i) => client(i)));
  await pool.close();
  const requests = latencies.length + failures;
  return {
    requests,
    sent,
    requestsPerSecond: requests / scenario.seconds,
    failures,
    statusCodes,
    latency: summarize(latencies),
  };
}

async function withAutocannon(scenario: Extract<Scenario, { kind: 'autocannon' }>): Promise<LoadResult> {
  const { target } = scenario;
  let next = 0;
  const result = await autocannon({
    url: `${target.url}${target.path}`,
    connections: scenario.connections,
    duration: scenario.seconds,
    requests: [
      {
        method: 'POST',
        headers: target.headers,
        body: target.body,
        // The context belongs to one connection: each connection keeps its own payer's token.
        setupRequest: (request, context) => {
          if (!target.tokens) return request;
          const connection = context as { token?: string };
          connection.token ??= target.tokens[next++ % target.tokens.length];
          return { ...request, headers: { ...request.headers, authorization: `Bearer ${connection.token}` } };
        },
      },
    ],
  });
  const statusCodes: Record<string, number> = {};
  for (const [key, value] of Object.entries(result)) {
    const match = /^(\d)xx$/.exec(key);
    if (match && typeof value === 'number' && value > 0) statusCodes[key] = value;
  }
  return {
    requests: result.requests.total,
    sent: result.requests.sent,
    requestsPerSecond: result.requests.average,
    failures: result.non2xx + result.errors + result.timeouts,
    statusCodes,
  };
}

async function sequential(scenario: Extract<Scenario, { kind: 'sequential' }>): Promise<LoadResult> {
  const { target } = scenario;
  const pool = new Pool(target.url, { connections: 1 });
  const headers = headersFor(target, 0);
  const samples: NonNullable<LoadResult['samples']> = [];
  const statusCodes: Record<string, number> = {};
  for (let i = 0; i < scenario.count; i++) {
    if (i > 0 && scenario.pauseMs) await new Promise((resolve) => setTimeout(resolve, scenario.pauseMs));
    const sent = performance.now();
    const res = await pool.request({ method: 'POST', path: target.path, headers, body: target.body });
    await res.body.text();
    const ms = performance.now() - sent;
    statusCodes[res.statusCode] = (statusCodes[res.statusCode] ?? 0) + 1;
    samples.push({ ms, settled: typeof res.headers['x-settlement-tx'] === 'string', status: res.statusCode });
  }
  await pool.close();
  const ok = samples.filter((sample) => sample.status === 200);
  return {
    requests: samples.length,
    sent: samples.length,
    requestsPerSecond: Number.NaN,
    failures: samples.length - ok.length,
    statusCodes,
    latency: summarize(ok.map((sample) => sample.ms)),
    samples,
  };
}

const scenario = JSON.parse(process.argv[2] ?? '{}') as Scenario;
const run = { 'closed-loop': closedLoop, autocannon: withAutocannon, sequential }[scenario.kind] as (
  scenario: Scenario,
) => Promise<LoadResult>;
const result = await run(scenario);
process.stdout.write(`${JSON.stringify(result)}\n`);
