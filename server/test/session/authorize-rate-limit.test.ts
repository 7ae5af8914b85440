import { afterAll, beforeAll, expect, test } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { type GatewayUnderTest, startGateway } from '../support/chain-gateway.js';
import { testConfig } from '../support/config.js';

/** The smallest environment the gateway starts with. */
const environment = {
  JWT_SECRET: 'a'.repeat(32),
  CHAIN_RPC_URL: 'https://mainnet.base.org',
  TREASURY_ADDRESS: '0x00000000000000000000000000000000000000aa',
  SESSION_KEY_PRIVATE_KEY: `0x${'11'.repeat(32)}`,
};

let gateway: GatewayUnderTest;

beforeAll(async () => {
  const { limits } = loadConfig({ ...environment, RATE_LIMIT_AUTHORIZE_MAX: '2' });
  const base = testConfig();
  gateway = await startGateway(
    testConfig({ limits: { ...base.limits, routeRateLimits: limits.routeRateLimits } }),
  );
});

afterAll(() => gateway?.close());

const authorizeAttempt = () =>
  fetch(`${gateway.url}/v1/authorize`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ chainId: 31337 }),
  });

test('by default POST /v1/authorize allows a caller 30 requests per window, a twentieth of the other routes', () => {
  const { limits } = loadConfig(environment);
  expect(limits.routeRateLimits['POST /v1/authorize']).toBe(30);
  expect(limits.rateLimitMax).toBe(600);
});

test('past RATE_LIMIT_AUTHORIZE_MAX a caller gets 429 with retry-after on POST /v1/authorize, while its other requests still answer', async () => {
  expect((await authorizeAttempt()).status).toBe(400);
  expect((await authorizeAttempt()).status).toBe(400);

  const limited = await authorizeAttempt();
  expect(limited.status).toBe(429);
  expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
  const body = (await limited.json()) as { error: { code: string; message: string } };
  expect(body.error.code).toBe('rate_limited');
  expect(body.error.message).toMatch(/rate limit of 2 requests per 60 s exceeded/);

  expect((await fetch(`${gateway.url}/v1/models`)).status).toBe(200);
  // The dashboard reads the terms at every page load: GET counts with the other routes.
  const terms = await fetch(`${gateway.url}/v1/authorize`);
  expect(terms.status).not.toBe(429);
  expect(terms.headers.get('x-ratelimit-limit')).toBe(String(testConfig().limits.rateLimitMax));
});
