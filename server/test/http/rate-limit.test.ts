import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, test } from 'vitest';
import { buildApp } from '../../src/app.js';
import { ConfigError, type GatewayConfig } from '../../src/config.js';
import { testConfig } from '../support/config.js';

const WINDOW_MS = 60_000;
const apps: FastifyInstance[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

async function gateway(limits: Partial<GatewayConfig['limits']>) {
  const app = await buildApp(
    testConfig({ limits: { rateLimitWindowMs: WINDOW_MS, ...limits } as GatewayConfig['limits'] }),
    { checks: [] },
  );
  apps.push(app);
  return app;
}

const get = (app: FastifyInstance, url: string, ip = '10.0.0.1') =>
  app.inject({ method: 'GET', url, remoteAddress: ip });

describe('a caller over its limit', () => {
  test('gets 429 rate_limited in the envelope with the four headers', async () => {
    const app = await gateway({ rateLimitMax: 3 });
    const remaining = [];
    for (let i = 0; i < 3; i++) {
      const res = await get(app, '/health');
      expect(res.statusCode).toBe(200);
      remaining.push(res.headers['x-ratelimit-remaining']);
    }
    expect(remaining).toEqual(['2', '1', '0']);

    const before = Math.floor(Date.now() / 1000);
    const res = await get(app, '/health?probe=1');
    expect(res.statusCode).toBe(429);
    const body = res.json();
    expect(body).toMatchObject({
      data: null,
      error: { code: 'rate_limited' },
      meta: { path: '/health' },
    });
    expect(body.error.message).toContain('3 requests per 60 s');
    expect(res.headers['x-ratelimit-limit']).toBe('3');
    expect(res.headers['x-ratelimit-remaining']).toBe('0');
    const reset = Number(res.headers['x-ratelimit-reset']);
    expect(Number.isInteger(reset)).toBe(true);
    expect(reset).toBeGreaterThan(before);
    expect(reset).toBeLessThanOrEqual(before + WINDOW_MS / 1000 + 1);
    const retryAfter = Number(res.headers['retry-after']);
    expect(Number.isInteger(retryAfter)).toBe(true);
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(WINDOW_MS / 1000);
  });

  test('the reset header of an allowed answer is a Unix timestamp too', async () => {
    const app = await gateway({ rateLimitMax: 3 });
    const before = Math.floor(Date.now() / 1000);
    const res = await get(app, '/health');
    const reset = Number(res.headers['x-ratelimit-reset']);
    expect(reset).toBeGreaterThan(before);
    expect(reset).toBeLessThanOrEqual(before + WINDOW_MS / 1000 + 1);
  });

  test('is counted by IP: another IP is still served', async () => {
    const app = await gateway({ rateLimitMax: 1 });
    expect((await get(app, '/health', '10.0.0.1')).statusCode).toBe(200);
    expect((await get(app, '/health', '10.0.0.1')).statusCode).toBe(429);
    expect((await get(app, '/health', '10.0.0.2')).statusCode).toBe(200);
  });

  test('refused requests count too', async () => {
    const app = await gateway({ rateLimitMax: 2 });
    const bad = () =>
      app.inject({
        method: 'POST',
        url: '/v1/chat/completions',
        payload: { messages: [] },
        remoteAddress: '10.0.0.9',
      });
    expect((await bad()).statusCode).toBe(400);
    expect((await bad()).statusCode).toBe(400);
    const limited = await bad();
    expect(limited.statusCode).toBe(429);
    expect(limited.json().error.code).toBe('rate_limited');
  });

  test('requests no route matches count too (404 and 405), answered without reading their body', async () => {
    const app = await gateway({ rateLimitMax: 2 });
    const unmatched = (method: 'POST' | 'DELETE', url: string) =>
      app.inject({
        method,
        url,
        headers: { 'content-type': 'application/json' },
        // Not JSON: read, it would be a 400.
        payload: '{"not json',
        remoteAddress: '10.0.0.10',
      });
    const notFound = await unmatched('POST', '/nope');
    expect(notFound.statusCode).toBe(404);
    expect(notFound.headers['x-ratelimit-remaining']).toBe('1');
    expect((await unmatched('DELETE', '/v1/chat/completions')).statusCode).toBe(405);
    const limited = await unmatched('POST', '/nope');
    expect(limited.statusCode).toBe(429);
    expect(limited.json().error.code).toBe('rate_limited');
    expect((await get(app, '/health', '10.0.0.10')).statusCode).toBe(429);
  });
});

describe('per-route limits (RATE_LIMITS)', () => {
  test('a listed route has its own limit and its own counter', async () => {
    const app = await gateway({ rateLimitMax: 3, routeRateLimits: { '/v1/models': 1 } });
    const models = await get(app, '/v1/models');
    expect(models.statusCode).toBe(200);
    expect(models.headers['x-ratelimit-limit']).toBe('1');
    const limited = await get(app, '/v1/models');
    expect(limited.statusCode).toBe(429);
    expect(limited.headers['x-ratelimit-limit']).toBe('1');
    expect(limited.json().error.message).toContain('1 requests per 60 s');

    const health = await get(app, '/health');
    expect(health.statusCode).toBe(200);
    expect(health.headers['x-ratelimit-limit']).toBe('3');
    expect(health.headers['x-ratelimit-remaining']).toBe('2');
  });

  /** GET, its HEAD and POST of /graphql, listed with 2 requests a window, share one counter. */
  async function expectOneCounterPerPath(app: FastifyInstance, ip: string) {
    const send = (method: 'GET' | 'HEAD' | 'POST') =>
      app.inject({
        method,
        url: method === 'POST' ? '/graphql' : '/graphql?query=%7B__typename%7D',
        remoteAddress: ip,
        ...(method === 'POST' && { payload: { query: '{ __typename }' } }),
      });
    const get = await send('GET');
    expect(get.statusCode).not.toBe(429);
    expect([get.headers['x-ratelimit-limit'], get.headers['x-ratelimit-remaining']]).toEqual(['2', '1']);
    const post = await send('POST');
    expect(post.statusCode).not.toBe(429);
    expect(post.headers['x-ratelimit-remaining']).toBe('0');
    for (const method of ['HEAD', 'POST', 'GET'] as const) {
      const limited = await send(method);
      expect(limited.statusCode, method).toBe(429);
      expect(limited.headers['x-ratelimit-limit']).toBe('2');
    }
    // Unlisted routes keep the shared default counter, untouched by those.
    const health = await app.inject({ method: 'GET', url: '/health', remoteAddress: ip });
    expect(health.statusCode).toBe(200);
    expect([health.headers['x-ratelimit-limit'], health.headers['x-ratelimit-remaining']]).toEqual([
      '100',
      '99',
    ]);
  }

  test('a listed path has one counter for all its methods: GET, its HEAD and POST together', async () => {
    const app = await gateway({ rateLimitMax: 100, routeRateLimits: { '/graphql': 2 } });
    await expectOneCounterPerPath(app, '10.0.0.7');
  });

  test.skipIf(!process.env.REDIS_URL)('so it has in Redis (needs REDIS_URL)', async () => {
    const app = await buildApp(
      testConfig({
        redisUrl: process.env.REDIS_URL,
        limits: {
          rateLimitMax: 100,
          rateLimitWindowMs: WINDOW_MS,
          routeRateLimits: { '/graphql': 2 } as Record<string, number>,
        } as GatewayConfig['limits'],
      }),
      { checks: [] },
    );
    apps.push(app);
    await app.ready();
    // A fresh caller: Redis keeps counters between runs.
    await expectOneCounterPerPath(
      app,
      `10.${[0, 0, 0].map(() => Math.floor(Math.random() * 250) + 1).join('.')}`,
    );
  });

  test('a wildcard route is named as registered', async () => {
    const app = await gateway({ rateLimitMax: 100, routeRateLimits: { '/v1/models/*': 1 } });
    expect((await get(app, '/v1/models/anthropic/claude-sonnet-5.5')).statusCode).toBe(200);
    expect((await get(app, '/v1/models/google/gemini-3.8-flash')).statusCode).toBe(429);
    expect((await get(app, '/v1/models')).statusCode).toBe(200);
  });

  test('a limit may be higher than the default', async () => {
    const app = await gateway({ rateLimitMax: 1, routeRateLimits: { '/health': 3 } });
    for (let i = 0; i < 3; i++) expect((await get(app, '/health')).statusCode).toBe(200);
    expect((await get(app, '/health')).statusCode).toBe(429);
  });

  test('a path that names no route stops start-up with a ConfigError naming RATE_LIMITS', async () => {
    const app = await gateway({ routeRateLimits: { '/v1/chat/completion': 5 } });
    const error = await app.ready().then(
      () => null,
      (thrown: unknown) => thrown,
    );
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).variable).toBe('RATE_LIMITS');
    expect((error as Error).message).toContain('/v1/chat/completion');
  });
});

describe('the shared store (REDIS_URL)', () => {
  /** A fresh caller per run, since Redis keeps counters between runs. */
  const freshIp = () => `10.${[0, 0, 0].map(() => Math.floor(Math.random() * 250) + 1).join('.')}`;

  test.skipIf(!process.env.REDIS_URL)(
    'two gateway instances share one counter (needs REDIS_URL)',
    async () => {
      const a = await gateway({ rateLimitMax: 2 });
      const config = testConfig({
        redisUrl: process.env.REDIS_URL,
        limits: { rateLimitMax: 2, rateLimitWindowMs: WINDOW_MS } as GatewayConfig['limits'],
      });
      const [first, second] = await Promise.all([buildApp(config, { checks: [] }), buildApp(config)]);
      apps.push(first!, second!);
      const ip = freshIp();
      expect((await get(first!, '/v1/models', ip)).statusCode).toBe(200);
      expect((await get(second!, '/v1/models', ip)).statusCode).toBe(200);
      const limited = await get(first!, '/v1/models', ip);
      expect(limited.statusCode).toBe(429);
      expect(limited.json().error.code).toBe('rate_limited');
      expect((await get(a, '/v1/models', ip)).statusCode).toBe(200);

      const health = await get(second!, '/health', freshIp());
      expect(health.json().data.dependencies.redis).toEqual({ status: 'up' });
    },
  );

  test('an unreachable Redis does not refuse callers, and /health shows it down', async () => {
    const app = await buildApp(
      testConfig({
        redisUrl: 'redis://127.0.0.1:9',
        limits: { rateLimitMax: 1, rateLimitWindowMs: WINDOW_MS } as GatewayConfig['limits'],
      }),
    );
    apps.push(app);
    for (let i = 0; i < 3; i++) expect((await get(app, '/v1/models')).statusCode).toBe(200);
    const health = await get(app, '/health');
    expect(health.json().data.dependencies.redis.status).toBe('down');
  });
});
