import OpenAI, { BadRequestError, InternalServerError, RateLimitError } from 'openai';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startAnthropicSimulator } from '../../devkit/simulators/anthropic.js';
import type { ScriptedHttpError, Simulator } from '../../devkit/simulators/index.js';
import { debtOf, findUsageRecord } from '../../src/billing/ledger.js';
import type { Store } from '../../src/store/database.js';
import { TEST_PAYER } from '../support/chat-doubles.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';
import { collect, failure, ledgerApp, useHarness } from './gateway-harness.js';

const CLAUDE = 'anthropic/claude-haiku-4.5';
const GEMINI = 'google/gemini-2.5-flash';
const LOCAL = 'local/llama-3.1-8b';
const hi = [{ role: 'user' as const, content: 'Hi' }];

const h = useHarness();

type Family = 'anthropic' | 'gemini' | 'local';
const MODELS: Record<Family, string> = { anthropic: CLAUDE, gemini: GEMINI, local: LOCAL };
const simulator = (family: Family): Simulator<{ httpError: ScriptedHttpError }> => h[family];

/** The official client as users build it: it retries 429 and 5xx twice, after their Retry-After. */
const retrying = () => new OpenAI({ baseURL: `${h.url}/v1`, apiKey: 'unused-by-the-doubles' });

/** Sends one request (a stream read to its end when `stream`) that must fail; the upstream calls it made. */
async function refused(family: Family, httpError: ScriptedHttpError, stream: boolean, client = h.client) {
  const upstream = simulator(family);
  upstream.script({ httpError });
  const before = upstream.log.length;
  const request = { model: MODELS[family], messages: hi };
  const error = await failure(
    stream
      ? client.chat.completions.create({ ...request, stream }).then(collect)
      : client.chat.completions.create(request),
  );
  return { error, calls: upstream.log.length - before };
}

describe('a request the provider refuses is a 400, as OpenAI answers it, sent once and charged nothing', () => {
  const overflows: Array<[Family, ScriptedHttpError]> = [
    ['anthropic', { status: 400, message: 'prompt is too long: 210000 tokens > 200000 maximum' }],
    [
      'anthropic',
      {
        status: 400,
        message:
          'input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, decrease input length or `max_tokens` and try again',
      },
    ],
    [
      'gemini',
      {
        status: 400,
        message: 'The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).',
      },
    ],
    [
      'local',
      {
        status: 400,
        code: 'context_length_exceeded',
        message:
          "This model's maximum context length is 131072 tokens. However, you requested 140000 tokens. Please reduce the length of the messages or completion.",
      },
    ],
  ];
  for (const stream of [false, true])
    test.each(overflows)(
      `a context overflow (%s; stream: ${stream}) is BadRequestError code context_length_exceeded with the provider's words`,
      async (family, httpError) => {
        const { error, calls } = await refused(family, httpError, stream, retrying());
        expect(error).toBeInstanceOf(BadRequestError);
        expect(error).toMatchObject({
          status: 400,
          code: 'context_length_exceeded',
          type: 'invalid_request_error',
          param: null,
        });
        expect(error.message).toContain(httpError.message);
        expect(error.error).toMatchObject({
          details: { upstreamStatus: 400, upstreamMessage: httpError.message },
        });
        expect(calls).toBe(1);
        expect(h.recorder.entries).toEqual([]);
      },
    );

  test.each<[Family, ScriptedHttpError]>([
    ['anthropic', { status: 413, message: 'Request exceeds the maximum allowed number of bytes.' }],
    ['anthropic', { status: 400, message: 'messages.1.content.0.image.source.base64: invalid base64 data' }],
    [
      'gemini',
      { status: 400, message: '* GenerateContentRequest.tools[0].function_declarations[0].name: Invalid' },
    ],
    ['local', { status: 400, message: "Invalid value for 'temperature': must be at most 2." }],
  ])(
    'another refusal (%s %o) is BadRequestError code provider_invalid_request',
    async (family, httpError) => {
      const { error, calls } = await refused(family, httpError, false, retrying());
      expect(error).toBeInstanceOf(BadRequestError);
      expect(error).toMatchObject({
        status: 400,
        code: 'provider_invalid_request',
        type: 'invalid_request_error',
      });
      expect(error.message).toContain(httpError.message);
      expect(calls).toBe(1);
      expect(h.recorder.entries).toEqual([]);
    },
  );

  test("Gemini's FAILED_PRECONDITION (billing not enabled, a region it does not serve) is the operator's: 502, not retried", async () => {
    const { error, calls } = await refused(
      'gemini',
      {
        status: 400,
        type: 'FAILED_PRECONDITION',
        message: 'User location is not supported for the API use.',
      },
      false,
      retrying(),
    );
    expect(error.status).toBe(502);
    expect(error.code).toBe('provider_error');
    expect(error.headers?.get('x-should-retry')).toBe('false');
    expect(calls).toBe(1);
  });
});

describe("a provider's rate limit is a 429 with the provider's Retry-After", () => {
  for (const stream of [false, true])
    test.each<[Family, ScriptedHttpError, string]>([
      [
        'anthropic',
        {
          status: 429,
          message: 'Number of request tokens has exceeded your rate limit',
          retryAfterSeconds: 7,
        },
        '7',
      ],
      // Gemini says it in a google.rpc.RetryInfo detail of its body ("17s"); whole seconds, rounded up.
      ['gemini', { status: 429, message: 'You exceeded your current quota.', retryAfterSeconds: 17 }, '17'],
      ['gemini', { status: 429, message: 'You exceeded your current quota.', retryAfterSeconds: 0.5 }, '1'],
      ['local', { status: 429, message: 'Rate limit reached for requests', retryAfterSeconds: 3 }, '3'],
    ])(`%s %o (stream: ${stream}): RateLimitError, retry-after %s`, async (family, httpError, retryAfter) => {
      const { error, calls } = await refused(family, httpError, stream);
      expect(error).toBeInstanceOf(RateLimitError);
      expect(error).toMatchObject({ status: 429, code: 'provider_rate_limited', type: 'rate_limit_error' });
      expect(error.headers?.get('retry-after')).toBe(retryAfter);
      expect(error.error).toMatchObject({
        details: {
          upstreamStatus: 429,
          upstreamMessage: httpError.message,
          retryAfterSeconds: Number(retryAfter),
        },
      });
      expect(error.message).toContain(httpError.message);
      expect(calls).toBe(1);
      expect(h.recorder.entries).toEqual([]);
    });

  test('a rate limit that states no delay is a 429 without Retry-After (the client backs off on its own)', async () => {
    const { error } = await refused('anthropic', { status: 429, message: 'rate limited' }, false);
    expect(error).toBeInstanceOf(RateLimitError);
    expect(error.headers?.get('retry-after')).toBeNull();
  });

  test('the openai client waits what Gemini asked and retries: the third call answers', async () => {
    h.gemini.script(
      { httpError: { status: 429, message: 'quota', retryAfterSeconds: 1 } },
      { httpError: { status: 429, message: 'quota', retryAfterSeconds: 1 } },
    );
    const before = h.gemini.log.length;
    const chunks = await collect(
      await retrying().chat.completions.create({ model: GEMINI, messages: hi, stream: true }),
    );
    expect(chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join('')).toBe('echo: Hi');
    expect(h.gemini.log.length - before).toBe(3);
    expect(h.recorder.entries).toHaveLength(1);
  });

  test("an exhausted quota (OpenAI's insufficient_quota) is the operator's, which waiting does not cure: 502, not retried", async () => {
    const { error, calls } = await refused(
      'local',
      {
        status: 429,
        type: 'insufficient_quota',
        code: 'insufficient_quota',
        message: 'You exceeded your current quota.',
      },
      false,
      retrying(),
    );
    expect(error.status).toBe(502);
    expect(error.headers?.get('x-should-retry')).toBe('false');
    expect(calls).toBe(1);
  });
});

describe('an overloaded provider is a 503 with Retry-After', () => {
  for (const stream of [false, true])
    test.each<[Family, ScriptedHttpError, string]>([
      ['anthropic', { status: 529, message: 'Overloaded', retryAfterSeconds: 5 }, '5'],
      ['anthropic', { status: 529, message: 'Overloaded' }, '2'],
      ['gemini', { status: 503, message: 'The model is overloaded. Please try again later.' }, '2'],
      ['local', { status: 503, message: 'The engine is currently overloaded, please try again later' }, '2'],
    ])(
      `%s %o (stream: ${stream}): InternalServerError 503, retry-after %s`,
      async (family, httpError, retryAfter) => {
        const { error, calls } = await refused(family, httpError, stream);
        expect(error).toBeInstanceOf(InternalServerError);
        expect(error).toMatchObject({ status: 503, code: 'provider_overloaded', type: 'server_error' });
        expect(error.headers?.get('retry-after')).toBe(retryAfter);
        expect(error.message).toContain(httpError.message);
        expect(calls).toBe(1);
        expect(h.recorder.entries).toEqual([]);
      },
    );
});

describe('in the ledger: a refused request leaves no usage record and no debt', () => {
  let database: TestDatabase;
  let store: Store;
  let anthropic: Simulator<{ httpError: ScriptedHttpError }>;
  beforeAll(async () => {
    database = await createTestDatabase('sqlite');
    store = await database.open();
    anthropic = await startAnthropicSimulator();
  });
  afterAll(async () => {
    await anthropic.close();
    await database.drop();
  });

  test.each<ScriptedHttpError>([
    { status: 400, message: 'prompt is too long: 210000 tokens > 200000 maximum' },
    { status: 429, message: 'rate limited', retryAfterSeconds: 4 },
    { status: 529, message: 'Overloaded' },
  ])('Anthropic %o; the next request, served, is recorded and owed', async (httpError) => {
    const app = await ledgerApp(anthropic.url, store);
    try {
      const owed = async () => (await debtOf(store, TEST_PAYER)).unpaidPicoUsd;
      const send = () =>
        app.inject({ method: 'POST', url: '/v1/chat/completions', payload: { model: CLAUDE, messages: hi } });
      const before = await owed();
      anthropic.script({ httpError });
      const refusal = await send();
      expect(refusal.statusCode).toBe(httpError.status === 529 ? 503 : httpError.status);
      expect(await findUsageRecord(store, String(refusal.headers['x-request-id']))).toBeUndefined();
      expect(await owed()).toBe(before);
      const served = await send();
      expect(served.statusCode).toBe(200);
      const record = await findUsageRecord(store, String(served.headers['x-request-id']));
      expect(await owed()).toBe(before + record!.cost.totalPicoUsd);
    } finally {
      await app.close();
    }
  });
});
