import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type AnthropicStep, startAnthropicSimulator } from '../../devkit/simulators/anthropic.js';
import type { Simulator } from '../../devkit/simulators/simulator-server.js';
import { buildApp } from '../../src/app.js';
import { loadCatalog } from '../../src/catalog/catalog.js';
import type { GatewayConfig } from '../../src/config.js';
import { createGatewayMetrics } from '../../src/observability/metrics.js';
import { meteredProviders } from '../../src/observability/provider-metrics.js';
import type { ProviderRegistry } from '../../src/providers/registry.js';
import { type ProviderAdapter, ProviderError, UpstreamCutError } from '../../src/providers/types.js';
import { zeroUsage } from '../../src/providers/usage.js';
import { gateDouble } from '../support/chat-doubles.js';
import { testConfig } from '../support/config.js';
import { parseExposition, type Sample, sampleValue } from './prometheus-text.js';

const MODEL = 'anthropic/claude-sonnet-5.5';

let anthropic: Simulator<AnthropicStep>;
let app: FastifyInstance;
let client: OpenAI;

/** A gateway with a real ledger (SQLite in memory) and the real Anthropic adapter aimed at its simulator. */
async function startGateway(overrides: Partial<GatewayConfig> = {}): Promise<FastifyInstance> {
  const base = testConfig();
  const gateway = await buildApp(
    testConfig({
      providers: { ...base.providers, anthropic: { apiKey: 'sk-ant-test', baseUrl: anthropic.url } },
      ...overrides,
    }),
    { gate: gateDouble(), checks: [] },
  );
  await gateway.listen({ port: 0, host: '127.0.0.1' });
  return gateway;
}

beforeAll(async () => {
  anthropic = await startAnthropicSimulator();
  app = await startGateway();
  const { port } = app.server.address() as AddressInfo;
  client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'unused', maxRetries: 0 });
});
afterAll(async () => {
  await app?.close();
  await anthropic?.close();
});

/** The sum of a metric's samples over all its labels. */
const total = (samples: Sample[], name: string) =>
  samples.filter((sample) => sample.name === name).reduce((sum, sample) => sum + sample.value, 0);

async function scrape(gateway = app): Promise<Sample[]> {
  const res = await gateway.inject({ method: 'GET', url: '/metrics' });
  expect(res.statusCode, res.body).toBe(200);
  expect(res.headers['content-type']).toBe('text/plain; version=0.0.4; charset=utf-8');
  return parseExposition(res.body);
}

describe('GET /metrics', () => {
  test('serves the Prometheus text format with the process metrics', async () => {
    const samples = await scrape();
    expect(sampleValue(samples, 'process_resident_memory_bytes')).toBeGreaterThan(0);
    expect(sampleValue(samples, 'nodejs_eventloop_lag_p99_seconds')).toBeGreaterThanOrEqual(0);
    expect(sampleValue(samples, 'paygate_debt_outstanding_usd')).toBe(0);
    expect(sampleValue(samples, 'paygate_settlements_unfinished')).toBe(0);
  });

  test('counts requests by route template, method and status, and times them', async () => {
    const before = await scrape();
    const count = (samples: Sample[], labels: Record<string, string>) =>
      sampleValue(samples, 'paygate_http_requests_total', labels) ?? 0;
    const modelRoute = { route: '/v1/models/*', method: 'GET', status: '200' };
    const unmatched = { route: 'unmatched', method: 'GET', status: '404' };
    await app.inject({ method: 'GET', url: '/v1/models/anthropic/claude-sonnet-5.5' });
    await app.inject({ method: 'GET', url: '/v1/models/google/gemini-3.8-flash' });
    await app.inject({ method: 'GET', url: `/no/such/path/${Math.random()}` });
    const after = await scrape();
    expect(count(after, modelRoute) - count(before, modelRoute)).toBe(2);
    expect(count(after, unmatched) - count(before, unmatched)).toBe(1);
    // A scanner's paths never become labels.
    expect(after.some((sample) => sample.labels.route?.startsWith('/no/'))).toBe(false);
    const duration = { route: '/v1/models/*', method: 'GET' };
    expect(sampleValue(after, 'paygate_http_request_duration_seconds_count', duration)).toBe(
      count(after, modelRoute),
    );
    expect(sampleValue(after, 'paygate_http_request_duration_seconds_sum', duration)).toBeGreaterThan(0);
  });

  test('a completed chat request counts its provider call, its tokens, its cost and the debt it leaves', async () => {
    const before = await scrape();
    const completion = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'four words of prompt' }],
    });
    const usage = completion.usage as OpenAI.CompletionUsage & { cost: number };
    const after = await scrape();
    const delta = (name: string, labels: Record<string, string>) =>
      (sampleValue(after, name, labels) ?? 0) - (sampleValue(before, name, labels) ?? 0);

    const call = { provider: 'anthropic', mode: 'complete', outcome: 'ok' };
    expect(delta('paygate_provider_request_duration_seconds_count', call)).toBe(1);
    expect(delta('paygate_tokens_total', { model: MODEL, kind: 'input' })).toBe(usage.prompt_tokens);
    expect(delta('paygate_tokens_total', { model: MODEL, kind: 'output' })).toBe(usage.completion_tokens);
    const costUsd = usage.cost;
    expect(costUsd).toBeGreaterThan(0);
    expect(delta('paygate_cost_usd_total', { model: MODEL })).toBeCloseTo(costUsd, 15);
    // Nothing settles it (the gate is a double): it stays owed.
    expect(delta('paygate_debt_outstanding_usd', {})).toBeCloseTo(costUsd, 15);
  });

  test('a stream records the time to its first token', async () => {
    const before = await scrape();
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'stream me' }],
      stream: true,
    });
    for await (const _chunk of stream) {
      // drained
    }
    const after = await scrape();
    const count = (samples: Sample[], name: string, labels: Record<string, string>) =>
      sampleValue(samples, name, labels) ?? 0;
    const firstToken = { provider: 'anthropic' };
    const name = 'paygate_provider_time_to_first_token_seconds_count';
    expect(count(after, name, firstToken) - count(before, name, firstToken)).toBe(1);
    const call = { provider: 'anthropic', mode: 'stream', outcome: 'ok' };
    const calls = 'paygate_provider_request_duration_seconds_count';
    expect(count(after, calls, call) - count(before, calls, call)).toBe(1);
  });

  test('provider failures are counted by reason', async () => {
    anthropic.script({ httpError: { status: 529 } }, { httpError: { status: 400 } });
    for (const status of [503, 400])
      await expect(
        client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'fail' }] }),
      ).rejects.toMatchObject({ status });
    const samples = await scrape();
    expect(
      sampleValue(samples, 'paygate_provider_errors_total', { provider: 'anthropic', reason: 'status_5xx' }),
    ).toBe(1);
    expect(
      sampleValue(samples, 'paygate_provider_errors_total', { provider: 'anthropic', reason: 'status_4xx' }),
    ).toBe(1);
    const failed = { provider: 'anthropic', mode: 'complete', outcome: 'error' };
    expect(sampleValue(samples, 'paygate_provider_request_duration_seconds_count', failed)).toBe(2);
  });

  test.each([
    [
      'cut, by the gateway at its shutdown deadline',
      new UpstreamCutError('the call to anthropic was cut'),
      'cut',
    ],
    [
      'answer, an error event the provider sent',
      new ProviderError('overloaded', undefined, { reported: true }),
      'answer',
    ],
    [
      'answer, a function call Gemini could not make',
      new ProviderError('the answer ended with MALFORMED_FUNCTION_CALL', undefined, {
        usage: zeroUsage(true),
      }),
      'answer',
    ],
    ['connection, a transport failure', new ProviderError('could not be reached', undefined), 'connection'],
  ])('a failed provider call is counted by what failed: %s', async (_case, error, reason) => {
    const metrics = createGatewayMetrics();
    const adapter: ProviderAdapter = {
      prepareCompletion: () => () => Promise.reject(error),
      prepareStream: () => () => Promise.reject(new Error('not called')),
    };
    const model = loadCatalog().models.find((candidate) => candidate.id === MODEL)!;
    const registry: Pick<ProviderRegistry, 'adapterFor'> = { adapterFor: () => adapter };
    const send = meteredProviders(registry, metrics)
      .adapterFor(model)
      .prepareCompletion({ model, request: { model: model.id, messages: [] }, requestId: 'r' });
    await expect(send({ outputTokens: 16 })).rejects.toBe(error);
    const samples = parseExposition(await metrics.registry.metrics());
    expect(sampleValue(samples, 'paygate_provider_errors_total', { provider: 'anthropic', reason })).toBe(1);
    expect(total(samples, 'paygate_provider_errors_total')).toBe(1);
  });

  test('a request the provider cannot express is no provider call and no provider error', async () => {
    const before = await scrape();
    await expect(
      client.chat.completions.create({
        model: MODEL,
        messages: [
          { role: 'user', content: [{ type: 'image_url', image_url: { url: 'ftp://example.com/a.png' } }] },
        ],
      }),
    ).rejects.toMatchObject({ status: 400 });
    const after = await scrape();
    for (const name of ['paygate_provider_request_duration_seconds_count', 'paygate_provider_errors_total'])
      expect(total(after, name), name).toBe(total(before, name));
  });

  test('each app has its own registry', async () => {
    const other = await startGateway();
    try {
      const samples = await scrape(other);
      expect(sampleValue(samples, 'paygate_tokens_total', { model: MODEL, kind: 'input' })).toBeUndefined();
    } finally {
      await other.close();
    }
  });
});

describe('who may scrape', () => {
  test('without METRICS_TOKEN or ADMIN_TOKEN: loopback callers only', async () => {
    const remote = await app.inject({ method: 'GET', url: '/metrics', remoteAddress: '203.0.113.7' });
    expect(remote.statusCode).toBe(401);
    expect(remote.json()).toMatchObject({
      data: null,
      error: { code: 'unauthorized' },
      meta: { path: '/metrics' },
    });
    expect(remote.json().error.message).toContain('METRICS_TOKEN');
    for (const remoteAddress of ['127.0.0.1', '::1', '::ffff:127.0.0.1'])
      expect((await app.inject({ method: 'GET', url: '/metrics', remoteAddress })).statusCode).toBe(200);
  });

  test('with tokens: a bearer of METRICS_TOKEN or ADMIN_TOKEN, from anywhere', async () => {
    const metricsToken = 'metrics-token-0123456789';
    const adminToken = 'admin-token-0123456789';
    const guarded = await startGateway({ metricsToken, adminToken });
    try {
      const get = (authorization?: string, remoteAddress = '127.0.0.1') =>
        guarded.inject({
          method: 'GET',
          url: '/metrics',
          remoteAddress,
          headers: authorization === undefined ? {} : { authorization },
        });
      for (const refused of [
        undefined,
        'Bearer wrong-token-0123456789',
        `Basic ${metricsToken}`,
        `Bearer ${metricsToken}x`,
      ]) {
        const res = await get(refused);
        expect(res.statusCode, String(refused)).toBe(401);
        expect(res.headers['www-authenticate']).toBe('Bearer');
        expect(res.json().error.code).toBe('unauthorized');
      }
      expect((await get(`Bearer ${metricsToken}`, '203.0.113.7')).statusCode).toBe(200);
      expect((await get(`bearer ${adminToken}`, '203.0.113.7')).statusCode).toBe(200);
    } finally {
      await guarded.close();
    }
  });
});
