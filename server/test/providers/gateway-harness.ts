import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import OpenAI, { APIError } from 'openai';
import { afterAll, beforeAll, beforeEach, expect } from 'vitest';
import { startAnthropicSimulator } from '../../devkit/simulators/anthropic.js';
import { startGeminiSimulator } from '../../devkit/simulators/gemini.js';
import { startOpenAICompatibleSimulator } from '../../devkit/simulators/openai-compatible.js';
import { buildApp } from '../../src/app.js';
import type { Catalog } from '../../src/catalog/catalog.js';
import type { LimitsConfig } from '../../src/config.js';
import type { Store } from '../../src/store/database.js';
import { testCatalog } from '../support/catalog.js';
import { type GateDouble, gateDouble, type RecorderDouble, recorderDouble } from '../support/chat-doubles.js';
import { testConfig } from '../support/config.js';

export type Harness = Awaited<ReturnType<typeof startHarness>>;

/**
 * The test catalog (the shipped one and earlier models) plus a Gemini 3 model (it signs its
 * function calls) and two OpenAI-compatible upstreams served by its simulator: `local`, and
 * `openai` (taking `max_completion_tokens`).
 */
function catalogWith(localUrl: string): Catalog {
  return testCatalog({
    upstreams: {
      local: { baseUrl: `${localUrl}/v1`, apiKeyEnv: 'PAYGATE_TEST_LOCAL_KEY' },
      // The same simulator as OpenAI itself: its reasoning models take max_completion_tokens only.
      openai: { baseUrl: `${localUrl}/v1`, tokenLimitField: 'max_completion_tokens' },
    },
    models: [
      {
        id: 'google/gemini-3-pro-preview',
        provider: 'google',
        providerModel: 'gemini-3-pro-preview',
        name: 'Gemini 3 Pro (preview)',
        contextLength: 1048576,
        maxOutputTokens: 65536,
        pricing: { input: '2', output: '12', cacheRead: '0.2' },
      },
      {
        id: 'local/llama-3.1-8b',
        provider: 'local',
        providerModel: 'meta-llama/Llama-3.1-8B-Instruct',
        name: 'Llama 3.1 8B',
        contextLength: 131072,
        maxOutputTokens: 8192,
        pricing: { input: '0.05', output: '0.10' },
      },
      ...['openai', 'local'].map((upstream) => ({
        id: `${upstream}/o4-mini`,
        provider: upstream,
        providerModel: 'o4-mini',
        name: 'o4-mini',
        contextLength: 200000,
        maxOutputTokens: 100000,
        pricing: { input: '1.10', output: '4.40', cacheRead: '0.275' },
      })),
    ],
  });
}

/**
 * The gateway listening on 127.0.0.1 with its providers pointed at simulators, the payment gate
 * and usage recorder replaced by doubles, and an official OpenAI client aimed at it.
 */
export async function startHarness(limits: Partial<LimitsConfig> = {}) {
  const [anthropic, gemini, local] = await Promise.all([
    startAnthropicSimulator(),
    startGeminiSimulator(),
    startOpenAICompatibleSimulator(),
  ]);
  process.env.PAYGATE_TEST_LOCAL_KEY = 'sk-local-test';
  const gate: GateDouble = gateDouble({ 'x-settlement': 'none-due' });
  const recorder: RecorderDouble = recorderDouble();
  const config = testConfig({
    providers: {
      anthropic: { apiKey: 'sk-ant-test', baseUrl: anthropic.url },
      google: { apiKey: 'gemini-test', baseUrl: gemini.url },
    },
    limits: { rateLimitMax: 100_000, ...limits } as LimitsConfig,
  });
  const app: FastifyInstance = await buildApp(config, {
    gate,
    recorder,
    checks: [],
    catalog: catalogWith(local.url),
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused-by-the-doubles', maxRetries: 0 });
  return {
    app,
    url,
    client,
    gate,
    recorder,
    anthropic,
    gemini,
    local,
    async close() {
      await app.close();
      await Promise.all([anthropic.close(), gemini.close(), local.close()]);
    },
  };
}

/**
 * A suite's harness: its fields are set before the suite's tests and closed after them; before each
 * test the simulators' logs and the recorder are emptied and the doubles' settings cleared.
 */
export function useHarness(limits: Partial<LimitsConfig> = {}): Harness {
  const h = {} as Harness;
  beforeAll(async () => {
    Object.assign(h, await startHarness(limits));
  });
  afterAll(() => h.close?.());
  beforeEach(() => {
    for (const simulator of [h.anthropic, h.gemini, h.local]) simulator.log.length = 0;
    h.recorder.entries.length = 0;
    h.recorder.failure = undefined;
    h.gate.refusal = undefined;
    h.gate.owed = undefined;
    h.gate.outputTokens = undefined;
  });
  return h;
}

/** The gateway, not listening, with Anthropic at `anthropicUrl`, a gate double, and usage recorded in `store`. */
export function ledgerApp(anthropicUrl: string, store: Store): Promise<FastifyInstance> {
  return buildApp(
    testConfig({
      providers: { ...testConfig().providers, anthropic: { apiKey: 'sk-ant-test', baseUrl: anthropicUrl } },
    }),
    { gate: gateDouble(), store, checks: [] },
  );
}

/** Every chunk of a stream, read to its end. */
export async function collect(stream: AsyncIterable<OpenAI.Chat.Completions.ChatCompletionChunk>) {
  const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

/** A Structured Outputs format (`response_format.json_schema`) and an answer it describes. */
export const weatherReport = {
  name: 'weather_report',
  description: 'The weather of a city',
  strict: true,
  schema: {
    type: 'object',
    properties: { city: { type: 'string' }, celsius: { type: 'number' } },
    required: ['city', 'celsius'],
    additionalProperties: false,
  },
};
export const report = { city: 'Oslo', celsius: -3 };

/** The API error a request failed with (it must fail with one). */
export async function failure(promise: Promise<unknown>): Promise<APIError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(APIError);
  return error as APIError;
}

/** Reads a stream until it fails; returns the text that came before and the error. */
export async function readUntilFailure(stream: AsyncIterable<OpenAI.Chat.Completions.ChatCompletionChunk>) {
  let text = '';
  try {
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
  } catch (error) {
    return { text, error: error as APIError };
  }
  throw new Error(`the stream ended without an error after "${text}"`);
}
