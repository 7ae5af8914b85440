import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { buildApp } from '../../src/app.js';
import { loadCatalog, parseCatalog } from '../../src/catalog/catalog.js';
import { ConfigError } from '../../src/config.js';
import { testConfig } from '../support/config.js';

const dir = mkdtempSync(join(tmpdir(), 'paygate-models-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const apps: FastifyInstance[] = [];
afterAll(async () => {
  await Promise.all(apps.map((app) => app.close()));
});

/** The gateway listening on an ephemeral port, and an official OpenAI client pointed at it. */
async function listening(overrides = {}) {
  const shipped = { modelsFile: undefined, defaultModel: 'anthropic/claude-sonnet-5.5' };
  const app = await buildApp(testConfig({ ...shipped, ...overrides }), { checks: [] });
  apps.push(app);
  const address = await app.listen({ port: 0, host: '127.0.0.1' });
  return new OpenAI({ baseURL: `${address}/v1`, apiKey: 'x', maxRetries: 0 });
}

const model = (fields: Record<string, unknown> = {}) => ({
  id: 'acme/small-1',
  provider: 'acme',
  providerModel: 'small-1',
  name: 'Acme Small 1',
  contextLength: 32_000,
  maxOutputTokens: 8_000,
  pricing: { input: '0.15', output: '0.6' },
  ...fields,
});
const acmeCatalog = (fields: Record<string, unknown> = {}) => ({
  upstreams: { acme: { baseUrl: 'http://127.0.0.1:4000/v1/', apiKeyEnv: 'ACME_API_KEY' } },
  models: [model(fields)],
});
/** The acme model with a long-prompt tier above 16k tokens (of its 32k context), `fields` changed in the tier. */
const acmeLongPrompt = (fields: Record<string, unknown> = {}) =>
  acmeCatalog({
    pricing: {
      input: '1',
      output: '2',
      longPrompt: { aboveTokens: 16_000, input: '2', output: '4', ...fields },
    },
  });

describe('the shipped catalog read by the official openai client', () => {
  let client: OpenAI;
  beforeAll(async () => {
    client = await listening();
  });

  test('models.list() gives every <provider>/<model> id', async () => {
    const ids: string[] = [];
    for await (const entry of client.models.list()) ids.push(entry.id);
    expect(ids).toEqual(loadCatalog().models.map((m) => m.id));
    expect(ids).toEqual(expect.arrayContaining(['anthropic/claude-sonnet-5.5', 'google/gemini-3.8-flash']));
    expect(ids.every((id) => /^(anthropic|google)\/[\w.-]+$/.test(id))).toBe(true);
  });

  test('each entry has the OpenAI fields, its limits under both names, its parameters and prices', async () => {
    const page = await client.models.list();
    const sonnet = page.data.find((entry) => entry.id === 'anthropic/claude-sonnet-5.5');
    expect(sonnet).toEqual({
      id: 'anthropic/claude-sonnet-5.5',
      object: 'model',
      owned_by: 'anthropic',
      created: expect.any(Number),
      name: 'Claude Sonnet 5.5',
      context_length: 1_000_000,
      max_output_tokens: 128_000,
      top_provider: { context_length: 1_000_000, max_completion_tokens: 128_000, is_moderated: false },
      supported_parameters: [
        'max_tokens',
        'stop',
        'tools',
        'tool_choice',
        'parallel_tool_calls',
        'response_format',
        'structured_outputs',
        'reasoning',
      ],
      sampling: { parameters: [], not_together: [] },
      pricing: {
        unit: 'USD per million tokens',
        input: '2',
        output: '10',
        cache_read: '0.20',
        cache_write: '2.50',
        reasoning: '10',
        checked_at: '2026-11-29',
        source: expect.stringContaining('platform.claude.com/docs/en/models/sonnet-5-5/overview'),
      },
    });
  });

  test('a Gemini model lists the sampling parameters it takes', async () => {
    const page = await client.models.list();
    const flash = page.data.find((entry) => entry.id === 'google/gemini-3.8-flash') as unknown as {
      supported_parameters: string[];
    };
    expect(flash.supported_parameters).toEqual(
      expect.arrayContaining(['reasoning', 'temperature', 'top_p', 'top_k', 'seed']),
    );
    expect(flash.supported_parameters).not.toContain('frequency_penalty');
  });

  test('Gemini 3.1 Pro and Claude Haiku 5.5 state their long-prompt tiers; Gemini Flash has none', async () => {
    const page = await client.models.list();
    const pricing = (id: string) =>
      (page.data.find((entry) => entry.id === id) as unknown as { pricing: object })?.pricing;
    expect(pricing('google/gemini-3.1-pro-preview')).toMatchObject({
      input: '2',
      output: '12',
      cache_read: '0.20',
      reasoning: '12',
      long_prompt: { above_tokens: 200_000, input: '4', output: '18', cache_read: '0.40', reasoning: '18' },
    });
    expect(pricing('anthropic/claude-haiku-5.5')).toMatchObject({
      input: '0.10',
      output: '0.50',
      cache_read: '0.01',
      cache_write: '0.125',
      long_prompt: {
        above_tokens: 100_000,
        input: '0.50',
        output: '2.50',
        cache_read: '0.05',
        cache_write: '0.625',
      },
    });
    expect(pricing('google/gemini-3.8-flash')).not.toHaveProperty('long_prompt');
    expect(pricing('google/gemini-3.5-flash-lite')).not.toHaveProperty('long_prompt');
  });

  test('models.retrieve() reads one model by its <provider>/<model> id', async () => {
    const sonnet = await client.models.retrieve('anthropic/claude-sonnet-5.5');
    expect(sonnet).toMatchObject({
      id: 'anthropic/claude-sonnet-5.5',
      object: 'model',
      owned_by: 'anthropic',
    });
  });

  test('models.retrieve() of an unknown model is a 404 NotFoundError', async () => {
    const error = await client.models.retrieve('anthropic/claude-9').catch((thrown: unknown) => thrown);
    expect(error).toBeInstanceOf(OpenAI.NotFoundError);
    expect((error as InstanceType<typeof OpenAI.NotFoundError>).error).toMatchObject({ code: 'not_found' });
  });
});

describe('MODELS_FILE', () => {
  test('replaces the shipped catalog', async () => {
    const file = join(dir, 'acme.json');
    writeFileSync(file, JSON.stringify(acmeCatalog()));
    const client = await listening({ modelsFile: file, defaultModel: 'acme/small-1' });
    const page = await client.models.list();
    expect(page.data.map((entry) => entry.id)).toEqual(['acme/small-1']);
    expect(page.data[0]).toMatchObject({ owned_by: 'acme', pricing: { input: '0.15', output: '0.6' } });
  });

  test('a default model missing from the catalog stops start-up naming DEFAULT_MODEL', async () => {
    const file = join(dir, 'acme-only.json');
    writeFileSync(file, JSON.stringify(acmeCatalog()));
    const error = await buildApp(testConfig({ modelsFile: file })).catch((thrown: unknown) => thrown);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).variable).toBe('DEFAULT_MODEL');
  });

  test.each([
    ['a missing file', null, /could not be read/],
    ['a file that is not JSON', '{"models": [', /could not be read as JSON/],
  ])('%s is a ConfigError naming MODELS_FILE', (_name, content, message) => {
    const file = join(dir, `bad-${Math.random()}.json`);
    if (content !== null) writeFileSync(file, content);
    expect(() => loadCatalog(file)).toThrow(ConfigError);
    expect(() => loadCatalog(file)).toThrow(message);
    expect(() => loadCatalog(file)).toThrow(/^Invalid configuration: MODELS_FILE /);
  });
});

describe('parseCatalog refuses a bad catalog, naming MODELS_FILE and the entry', () => {
  const { models: _models, ...noModels } = acmeCatalog();
  const cases: Array<[string, unknown, string]> = [
    ['not an object', [], 'catalog must be an object with "models"'],
    ['no models list', noModels, 'catalog must be an object with "models"'],
    ['a model that is not an object', { models: ['x'] }, 'models[0] must be an object'],
    ['a model without id', acmeCatalog({ id: undefined }), 'models[0].id must be a non-empty string'],
    [
      'an id of another provider',
      acmeCatalog({ id: 'other/small-1' }),
      'models[0].id must start with "acme/"',
    ],
    [
      'an unknown provider',
      { models: [model({ id: 'zeta/x', provider: 'zeta' })] },
      'models[0].provider "zeta" is neither anthropic, google nor a listed upstream',
    ],
    [
      'a model listed twice',
      { ...acmeCatalog(), models: [model(), model()] },
      'models[1].id "acme/small-1" is listed twice',
    ],
    ['no pricing', acmeCatalog({ pricing: undefined }), 'models[0].pricing must be an object'],
    [
      'no output price',
      acmeCatalog({ pricing: { input: '1' } }),
      'models[0].pricing.output must be a decimal',
    ],
    [
      'a price with 7 decimals',
      acmeCatalog({ pricing: { input: '0.0000001', output: '1' } }),
      'models[0].pricing.input must be a decimal',
    ],
    ['a price as a number', acmeCatalog({ pricing: { input: 1, output: '1' } }), 'models[0].pricing.input'],
    [
      'a negative cache price',
      acmeCatalog({ pricing: { input: '1', output: '1', cacheRead: '-1' } }),
      'models[0].pricing.cacheRead',
    ],
    [
      'a long-prompt tier that is not an object',
      acmeCatalog({ pricing: { input: '1', output: '2', longPrompt: '2' } }),
      'models[0].pricing.longPrompt must be an object',
    ],
    [
      'a long-prompt tier without threshold',
      acmeLongPrompt({ aboveTokens: undefined }),
      'models[0].pricing.longPrompt.aboveTokens must be a positive integer',
    ],
    [
      'a long-prompt threshold of 0',
      acmeLongPrompt({ aboveTokens: 0 }),
      'models[0].pricing.longPrompt.aboveTokens must be a positive integer',
    ],
    [
      'a fractional long-prompt threshold',
      acmeLongPrompt({ aboveTokens: 16_000.5 }),
      'models[0].pricing.longPrompt.aboveTokens must be a positive integer',
    ],
    [
      'a long-prompt threshold as a string',
      acmeLongPrompt({ aboveTokens: '16000' }),
      'models[0].pricing.longPrompt.aboveTokens must be a positive integer',
    ],
    [
      'a long-prompt threshold no prompt can pass',
      acmeLongPrompt({ aboveTokens: 32_000 }),
      'models[0].pricing.longPrompt.aboveTokens must be below contextLength (32000)',
    ],
    [
      'a long-prompt tier without output price',
      acmeLongPrompt({ output: undefined }),
      'models[0].pricing.longPrompt.output must be a decimal',
    ],
    [
      'a long-prompt price with 7 decimals',
      acmeLongPrompt({ input: '2.0000001' }),
      'models[0].pricing.longPrompt.input must be a decimal',
    ],
    [
      'a long-prompt cache price as a number',
      acmeLongPrompt({ cacheRead: 0.5 }),
      'models[0].pricing.longPrompt.cacheRead must be a decimal',
    ],
    [
      'a zero context length',
      acmeCatalog({ contextLength: 0 }),
      'models[0].contextLength must be a positive integer',
    ],
    [
      'a fractional max output',
      acmeCatalog({ maxOutputTokens: 1.5 }),
      'models[0].maxOutputTokens must be a positive integer',
    ],
    [
      'a max output longer than the context',
      acmeCatalog({ maxOutputTokens: 32_001 }),
      'models[0].maxOutputTokens of "acme/small-1" must be at most its contextLength (32000)',
    ],
    [
      'a zero image bound',
      acmeCatalog({ maxImageTokens: 0 }),
      'models[0].maxImageTokens must be a positive integer',
    ],
    [
      'sampling that is not an object',
      acmeCatalog({ sampling: ['temperature'] }),
      'models[0].sampling must be an object with "parameters"',
    ],
    [
      'sampling naming an unknown parameter',
      acmeCatalog({ sampling: { parameters: ['temperature', 'min_p'] } }),
      'models[0].sampling.parameters names "min_p", not one of temperature, top_p, top_k, seed, frequency_penalty, presence_penalty',
    ],
    [
      'sampling naming a parameter twice',
      acmeCatalog({ sampling: { parameters: ['top_p', 'top_p'] } }),
      'models[0].sampling.parameters names a parameter twice',
    ],
    [
      'a group of one parameter',
      acmeCatalog({ sampling: { parameters: ['top_p'], notTogether: [['top_p']] } }),
      'models[0].sampling.notTogether[0] must name at least two parameters',
    ],
    [
      'a group naming a parameter the model does not take',
      acmeCatalog({ sampling: { parameters: ['temperature'], notTogether: [['temperature', 'top_p']] } }),
      'models[0].sampling.notTogether[0] names "top_p", which is not in models[0].sampling.parameters',
    ],
    [
      'a price check date that is not a day',
      acmeCatalog({ priceCheckedAt: '2026-02-30' }),
      'models[0].priceCheckedAt must be a date as YYYY-MM-DD',
    ],
    ['an empty source', acmeCatalog({ source: '' }), 'models[0].source must be a non-empty string'],
    [
      'an upstream without http(s) URL',
      { upstreams: { acme: { baseUrl: 'ftp://x' } }, models: [] },
      'upstreams.acme.baseUrl must be an http(s) URL',
    ],
    [
      'an upstream shadowing a built-in provider',
      { upstreams: { anthropic: { baseUrl: 'http://x' } }, models: [] },
      'upstreams.anthropic shadows a built-in provider',
    ],
    [
      'an upstream naming an unknown token limit field',
      { upstreams: { acme: { baseUrl: 'http://x', tokenLimitField: 'max_output_tokens' } }, models: [] },
      'upstreams.acme.tokenLimitField must be "max_tokens" or "max_completion_tokens"',
    ],
  ];
  test.each(cases)('%s', (_name, raw, message) => {
    let error: unknown;
    try {
      parseCatalog(raw);
    } catch (thrown) {
      error = thrown;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).variable).toBe('MODELS_FILE');
    expect((error as Error).message).toContain(`MODELS_FILE ${message}`);
  });

  test('a good catalog keeps upstreams without trailing slashes and finds models by id', () => {
    const catalog = parseCatalog(acmeCatalog());
    expect(catalog.upstreams.acme).toEqual({
      baseUrl: 'http://127.0.0.1:4000/v1',
      apiKeyEnv: 'ACME_API_KEY',
      tokenLimitField: undefined,
    });
    expect(catalog.find('acme/small-1')?.providerModel).toBe('small-1');
    expect(catalog.find('acme/missing')).toBeUndefined();
  });

  test('limits may reach the next one up: max output = context', () => {
    const limits = { contextLength: 8_000, maxOutputTokens: 8_000 };
    expect(parseCatalog(acmeCatalog(limits)).find('acme/small-1')).toMatchObject(limits);
  });

  test('the shipped catalog keeps every limit within its model limits, and says when and where each price was read', () => {
    for (const entry of loadCatalog().models) {
      expect(entry.maxImageTokens).toBeGreaterThan(0);
      expect(entry.maxOutputTokens).toBeLessThanOrEqual(entry.contextLength);
      expect(entry.priceCheckedAt).toMatch(/^2026-\d\d-\d\d$/);
      expect(entry.source).toBeTruthy();
    }
  });

  test('a model without sampling takes what its family translates; one with a rule keeps it', () => {
    const upstream = parseCatalog(acmeCatalog()).find('acme/small-1')!;
    expect(upstream.sampling.parameters).toContain('frequency_penalty');
    const claude = parseCatalog({
      models: [model({ id: 'anthropic/claude-x', provider: 'anthropic', providerModel: 'claude-x' })],
    }).find('anthropic/claude-x')!;
    expect(claude.sampling).toEqual({
      parameters: ['temperature', 'top_p', 'top_k'],
      notTogether: [['temperature', 'top_p']],
    });
    const rule = { parameters: ['temperature', 'top_p'], notTogether: [['top_p', 'temperature']] };
    expect(parseCatalog(acmeCatalog({ sampling: rule })).find('acme/small-1')!.sampling).toEqual(rule);
  });

  test('a good long-prompt tier is kept with the model', () => {
    expect(
      parseCatalog(acmeLongPrompt({ cacheRead: '0.2' })).find('acme/small-1')?.pricing.longPrompt,
    ).toEqual({
      aboveTokens: 16_000,
      input: '2',
      output: '4',
      cacheRead: '0.2',
    });
  });
});
