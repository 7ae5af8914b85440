import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { buildApp } from '../../src/app.js';
import { ApiError } from '../../src/http/errors.js';
import { authorize, newPayer } from '../session/harness.js';
import { type GateDouble, gateDouble } from '../support/chat-doubles.js';
import { testConfig } from '../support/config.js';
import { chatBody, useX402Stack } from '../x402/harness.js';
import { parseExposition, sampleValue } from './prometheus-text.js';

async function refusals(app: FastifyInstance, status: number, reason: string): Promise<number> {
  const res = await app.inject({ method: 'GET', url: '/metrics' });
  expect(res.statusCode).toBe(200);
  return (
    sampleValue(parseExposition(res.body), 'paygate_chat_refusals_total', {
      status: String(status),
      reason,
    }) ?? 0
  );
}

describe('refused chat requests on a real chain, counted by status and reason', () => {
  const stack = useX402Stack();
  const post = (headers: Record<string, string>, body: object = chatBody) =>
    fetch(`${stack.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });

  test('no credentials: 402 payment_required', async () => {
    const before = await refusals(stack.gateway.app, 402, 'payment_required');
    expect((await post({})).status).toBe(402);
    expect(await refusals(stack.gateway.app, 402, 'payment_required')).toBe(before + 1);
  });

  test('a token that is not one: 401 unauthorized', async () => {
    const before = await refusals(stack.gateway.app, 401, 'unauthorized');
    expect((await post({ authorization: 'Bearer not-a-token' })).status).toBe(401);
    expect(await refusals(stack.gateway.app, 401, 'unauthorized')).toBe(before + 1);
  });

  test("a request beyond its session's cap: 402 under the reason its answer states", async () => {
    const { token } = await authorize(stack.gateway, await newPayer(stack.local, 2), { cap: 10_000n });
    // 10,000 output tokens at $15 per million plus commission: 0.165 USDC, beyond the 0.01 cap.
    const res = await post({ authorization: `Bearer ${token}` }, { ...chatBody, max_tokens: 10_000 });
    expect(res.status).toBe(402);
    const reason = (await res.json()).error.details.reason;
    expect(reason).toMatch(/cap/);
    expect(await refusals(stack.gateway.app, 402, reason)).toBe(1);
  });
});

describe('the reason label stays bounded', () => {
  let app: FastifyInstance;
  let gate: GateDouble;
  beforeAll(async () => {
    gate = gateDouble();
    app = await buildApp(testConfig(), { gate, checks: [] });
  });
  afterAll(() => app?.close());

  const refusedWith = async (error: ApiError) => {
    gate.refusal = error;
    const res = await app.inject({ method: 'POST', url: '/v1/chat/completions', payload: chatBody });
    expect(res.statusCode).toBe(error.statusCode);
  };

  test('a known payment reason counts as itself, an unknown one as other, none as the error code; other routes not at all', async () => {
    expect((await app.inject({ method: 'GET', url: '/v1/models/nobody/nothing' })).statusCode).toBe(404);
    await refusedWith(
      new ApiError(429, 'too_many_in_flight', 'wait', { details: { reason: 'requests_in_flight' } }),
    );
    await refusedWith(
      new ApiError(402, 'payment_required', 'pay', { details: { reason: 'insufficient_balance' } }),
    );
    await refusedWith(
      new ApiError(402, 'payment_required', 'pay', { details: { reason: 'node says 0xdeadbeef' } }),
    );
    await refusedWith(new ApiError(503, 'payments_unavailable', 'later'));
    expect(await refusals(app, 429, 'requests_in_flight')).toBe(1);
    expect(await refusals(app, 402, 'insufficient_balance')).toBe(1);
    expect(await refusals(app, 402, 'other')).toBe(1);
    expect(await refusals(app, 503, 'payments_unavailable')).toBe(1);
    const samples = parseExposition((await app.inject({ method: 'GET', url: '/metrics' })).body);
    const counted = samples.filter((sample) => sample.name === 'paygate_chat_refusals_total');
    expect(counted.reduce((sum, sample) => sum + sample.value, 0)).toBe(4);
  });
});
