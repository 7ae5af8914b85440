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
 * The cost a payer is told for Gemini 2.5 Pro, priced by the gateway's own usage recorder at the
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

describe('Gemini 2.5 Pro states the cost of its prompt tier in usage.cost and usage.cost_details', () => {
  test.each<[string, GeminiWireUsage, object]>([
    [
      // 150000*$1.25 + 50000*$0.125 + 2000*$10 per million
      'a prompt of 200k tokens, 50k of them cached: base prices',
      { promptTokenCount: 200_000, cachedContentTokenCount: 50_000, candidatesTokenCount: 2_000 },
      {
        cost: 0.235125,
        cost_details: {
          total_usd: '0.235125',
          provider_usd: '0.21375',
          commission_usd: '0.021375',
          total_pico_usd: '235125000000',
          provider_pico_usd: '213750000000',
          commission_pico_usd: '21375000000',
        },
      },
    ],
    [
      // 150001*$2.50 + 50000*$0.25 + 2000*$15 per million
      'a prompt of 200,001 tokens, 50k of them cached: tier prices',
      { promptTokenCount: 200_001, cachedContentTokenCount: 50_000, candidatesTokenCount: 2_000 },
      {
        cost: 0.45925275,
        cost_details: {
          total_usd: '0.45925275',
          provider_usd: '0.4175025',
          commission_usd: '0.04175025',
          total_pico_usd: '459252750000',
          provider_pico_usd: '417502500000',
          commission_pico_usd: '41750250000',
        },
      },
    ],
    [
      // 300000*$2.50 + 2000*$15 per million: what Google charges the operator
      'a prompt of 300k tokens with 2k output: $0.78 plus commission',
      { promptTokenCount: 300_000, candidatesTokenCount: 2_000 },
      {
        cost: 0.858,
        cost_details: {
          total_usd: '0.858',
          provider_usd: '0.78',
          commission_usd: '0.078',
          total_pico_usd: '858000000000',
          provider_pico_usd: '780000000000',
          commission_pico_usd: '78000000000',
        },
      },
    ],
  ])('%s', async (_name, usage, cost) => {
    gemini.script({ text: 'Summary.', usage });
    const response = await app.inject({
      method: 'POST',
      url: '/v1/chat/completions',
      payload: { model: 'google/gemini-2.5-pro', messages: [{ role: 'user', content: 'Summarize.' }] },
    });
    expect(response.statusCode).toBe(200);
    expect(response.json().usage).toMatchObject(cost);
  });
});
