import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  type GeminiStep,
  type GeminiWireUsage,
  startGeminiSimulator,
} from '../../devkit/simulators/gemini.js';
import type { Simulator } from '../../devkit/simulators/simulator-server.js';
import { buildApp } from '../../src/app.js';
import { gateDouble } from '../support/chat-doubles.js';
import { testConfig } from '../support/config.js';

/**
 * The cost a payer is told for Gemini 3.1 Pro, priced by the gateway's own usage recorder at the
 * shipped catalog's prices (10% commission): Google bills prompts over 200k tokens at a higher tier.
 */
let gemini: Simulator<GeminiStep>;
let app: FastifyInstance;
beforeAll(async () => {
  gemini = await startGeminiSimulator();
  app = await buildApp(
    testConfig({
      providers: {
        anthropic: { apiKey: 'sk-ant-test', baseUrl: 'http://127.0.0.1:9' },
        google: { apiKey: 'gemini-test', baseUrl: gemini.url },
      },
    }),
    { gate: gateDouble(), checks: [] },
  );
});
afterAll(async () => {
  await app.close();
  await gemini.close();
});

describe('Gemini 3.1 Pro states the cost of its prompt tier in usage.cost and usage.cost_details', () => {
  test.each<[string, GeminiWireUsage, object]>([
    [
      // 150000*$2 + 50000*$0.20 + 2000*$12 per million
      'a prompt of 200k tokens, 50k of them cached: base prices',
      { promptTokenCount: 200_000, cachedContentTokenCount: 50_000, candidatesTokenCount: 2_000 },
      {
        cost: 0.3674,
        cost_details: {
          total_usd: '0.3674',
          provider_usd: '0.334',
          commission_usd: '0.0334',
          total_pico_usd: '367400000000',
          provider_pico_usd: '334000000000',
          commission_pico_usd: '33400000000',
        },
      },
    ],
    [
      // 150001*$4 + 50000*$0.40 + 2000*$18 per million
      'a prompt of 200,001 tokens, 50k of them cached: tier prices',
      { promptTokenCount: 200_001, cachedContentTokenCount: 50_000, candidatesTokenCount: 2_000 },
      {
        cost: 0.7216044,
        cost_details: {
          total_usd: '0.7216044',
          provider_usd: '0.656004',
          commission_usd: '0.0656004',
          total_pico_usd: '721604400000',
          provider_pico_usd: '656004000000',
          commission_pico_usd: '65600400000',
        },
      },
    ],
    [
      // 300000*$4 + 2000*$18 per million: what Google charges the operator
      'a prompt of 300k tokens with 2k output: $1.236 plus commission',
      { promptTokenCount: 300_000, candidatesTokenCount: 2_000 },
      {
        cost: 1.3596,
        cost_details: {
          total_usd: '1.3596',
          provider_usd: '1.236',
          commission_usd: '0.1236',
          total_pico_usd: '1359600000000',
          provider_pico_usd: '1236000000000',
          commission_pico_usd: '123600000000',
        },
      },
    ],
  ])('%s', async (_name, usage, cost) => {
    gemini.script({ text: 'Summary.', usage });
    const response = await app.inject({
      method: 'POST',
      url: '/v1/chat/completions',
      payload: {
        model: 'google/gemini-3.1-pro-preview',
        messages: [{ role: 'user', content: 'Summarize.' }],
      },
    });
    expect(response.statusCode).toBe(200);
    expect(response.json().usage).toMatchObject(cost);
  });
});
