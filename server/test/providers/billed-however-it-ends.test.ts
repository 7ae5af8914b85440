import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import { startAnthropicSimulator } from '../../devkit/simulators/anthropic.js';
import { findUsageRecord } from '../../src/billing/ledger.js';
import { usageCost } from '../../src/services/chat-contracts.js';
import type { Store } from '../../src/store/database.js';
import { statedCost } from '../support/chat-doubles.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';
import { collect, failure, ledgerApp, readUntilFailure, useHarness } from './gateway-harness.js';

/**
 * Every upstream call is read from the provider as a stream, a whole answer too: however it ends
 * (a stall, a reset, the gateway's own deadline), what the provider counted is billed, its output
 * estimated from the text (UTF-8 bytes / 4, rounded up) where the provider never stated it.
 */

const CLAUDE = 'anthropic/claude-haiku-5.5';
const GEMINI = 'google/gemini-2.5-flash';
const LOCAL = 'local/llama-3.1-8b';
const UPSTREAM_TIMEOUT_MS = 1000;
const COMPLETION_TIMEOUT_MS = 3000;
const hi = [{ role: 'user' as const, content: 'Hi' }];

const h = useHarness({
  upstreamTimeoutMs: UPSTREAM_TIMEOUT_MS,
  upstreamCompletionTimeoutMs: COMPLETION_TIMEOUT_MS,
});

const usage = (counts: { inputTokens: number; outputTokens: number }) => ({
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  reasoningTokens: 0,
  exact: false,
  ...counts,
});

/** "Bonjour à tous." is 16 bytes of UTF-8 (à takes two): 4 tokens at 4 bytes a token. */
const bonjour = ['Bonjour ', 'à ', 'tous.'];

describe('a whole answer (one JSON body) cut short is billed for what the provider counted', () => {
  test('Anthropic stalls mid-answer past UPSTREAM_TIMEOUT_MS: 504 stating the usage billed, its output estimated from the text (no message_delta came)', async () => {
    h.anthropic.script({
      text: ['one ', 'two ', 'three'],
      usage: { input_tokens: 12, output_tokens: 9 },
      hangAfterEvents: 5, // message_start, content_block_start, ping, "one ", "two ", then silence
    });
    const error = await failure(h.client.chat.completions.create({ model: CLAUDE, messages: hi }));
    expect(error.status).toBe(504);
    // "one two " is 8 bytes: 2 tokens.
    expect(h.recorder.entries.map((entry) => entry.usage)).toEqual([
      usage({ inputTokens: 12, outputTokens: 2 }),
    ]);
    expect(error.error).toMatchObject({
      code: 'provider_error',
      details: {
        upstreamStatus: null,
        upstreamMessage: `anthropic sent nothing for ${UPSTREAM_TIMEOUT_MS} ms`,
        billed: { prompt_tokens: 12, completion_tokens: 2, ...usageCost(statedCost(h.recorder.entries[0]!)) },
      },
    });
    expect(h.gate.released).toBe(h.gate.admitted.length);
  });

  test('Gemini stalls mid-answer: billed for the output its last usageMetadata counted', async () => {
    h.gemini.script({
      text: ['alpha ', 'beta ', 'gamma'],
      usage: { promptTokenCount: 17 },
      hangAfterEvents: 2,
    });
    const error = await failure(h.client.chat.completions.create({ model: GEMINI, messages: hi }));
    expect(error.status).toBe(504);
    expect(h.recorder.entries.map((entry) => entry.usage)).toEqual([
      usage({ inputTokens: 17, outputTokens: 2 }),
    ]);
    expect(error.error).toMatchObject({ details: { billed: { prompt_tokens: 17, completion_tokens: 2 } } });
  });

  test('an answer still streaming at UPSTREAM_COMPLETION_TIMEOUT_MS is cut there: 504, billed for what was counted', async () => {
    // Eight words 0.5 s apart: 4 s, each pause shorter than UPSTREAM_TIMEOUT_MS.
    h.anthropic.script({ text: Array(8).fill('word '), usage: { input_tokens: 6 }, delayMs: 500 });
    const error = await failure(h.client.chat.completions.create({ model: CLAUDE, messages: hi }));
    expect(error.status).toBe(504);
    expect(error.error).toMatchObject({
      code: 'provider_error',
      details: { upstreamMessage: `anthropic did not finish its answer within ${COMPLETION_TIMEOUT_MS} ms` },
    });
    await vi.waitFor(() => expect(h.anthropic.log.at(-1)!.abortedAt).toBeDefined());
    const [billed] = h.recorder.entries.map((entry) => entry.usage);
    expect(billed).toMatchObject({ inputTokens: 6, exact: false });
    expect(billed!.outputTokens).toBeGreaterThan(0);
  });

  test('Anthropic cut before message_delta (a reset): 502 stating the usage billed, the output estimated from the text and the tool call arguments', async () => {
    h.anthropic.script({
      text: bonjour,
      toolCalls: [{ name: 'lookup', arguments: { q: 'Oslo' } }],
      usage: { input_tokens: 7, output_tokens: 40 },
      resetBeforeUsage: true,
      delayMs: 20,
    });
    const error = await failure(h.client.chat.completions.create({ model: CLAUDE, messages: hi }));
    expect(error.status).toBe(502);
    // 16 bytes of text and 12 of arguments ({"q":"Oslo"}): 7 tokens.
    expect(h.recorder.entries.map((entry) => entry.usage)).toEqual([
      usage({ inputTokens: 7, outputTokens: 7 }),
    ]);
    expect(error.error).toMatchObject({ details: { billed: { prompt_tokens: 7, completion_tokens: 7 } } });
  });

  test('an OpenAI-compatible upstream cut before its usage chunk: billed for the output estimated from the text, the prompt never counted', async () => {
    h.local.script({ text: bonjour, resetBeforeUsage: true, delayMs: 20 });
    const error = await failure(h.client.chat.completions.create({ model: LOCAL, messages: hi }));
    expect(error.status).toBe(502);
    expect(h.recorder.entries.map((entry) => entry.usage)).toEqual([
      usage({ inputTokens: 0, outputTokens: 4 }),
    ]);
  });

  test('an error Anthropic reports itself mid-answer (an overload) is still not billed: 503, nothing recorded', async () => {
    h.anthropic.script({ text: ['one ', 'two ', 'three'], usage: { input_tokens: 40 }, failAfterEvents: 5 });
    const error = await failure(h.client.chat.completions.create({ model: CLAUDE, messages: hi }));
    expect(error.status).toBe(503);
    expect(error.error).toMatchObject({ details: { upstreamStatus: 529, upstreamMessage: 'Overloaded' } });
    expect(error.error).not.toHaveProperty('details.billed');
    expect(h.recorder.entries).toEqual([]);
  });
});

describe('a stream cut short is billed likewise', () => {
  test('Anthropic cut before message_delta: the text relayed, an SSE error, billed with the output estimated from it', async () => {
    h.anthropic.script({
      text: bonjour,
      usage: { input_tokens: 7, output_tokens: 40 },
      resetBeforeUsage: true,
      delayMs: 20,
    });
    const { text, error } = await readUntilFailure(
      await h.client.chat.completions.create({ model: CLAUDE, messages: hi, stream: true }),
    );
    expect(text).toBe('Bonjour à tous.');
    expect(error.error).toMatchObject({ code: 'provider_error', details: { upstreamStatus: null } });
    expect(h.recorder.entries.map((entry) => entry.usage)).toEqual([
      usage({ inputTokens: 7, outputTokens: 4 }),
    ]);
  });
});

describe('the output limit sent upstream is the one admission decided', () => {
  test.each([
    [CLAUDE, (body: Record<string, unknown>) => body.max_tokens],
    [
      GEMINI,
      (body: { generationConfig: { maxOutputTokens: number } }) => body.generationConfig.maxOutputTokens,
    ],
    // In the client's own field (max_tokens when it set none), as this upstream names none.
    [LOCAL, (body: Record<string, unknown>) => body.max_completion_tokens ?? body.max_tokens],
    ['openai/o4-mini', (body: Record<string, unknown>) => body.max_completion_tokens],
  ] as const)('%s gets exactly it, whatever the client asked, streamed or not', async (model, limitOf) => {
    h.gate.outputTokens = 321;
    const simulator = model === CLAUDE ? h.anthropic : model === GEMINI ? h.gemini : h.local;
    for (const asked of [{}, { max_tokens: 5000 }, { max_completion_tokens: 6000 }])
      for (const stream of [false, true]) {
        const request = { model, messages: hi, ...asked };
        if (stream) await collect(await h.client.chat.completions.create({ ...request, stream }));
        else await h.client.chat.completions.create(request);
        // biome-ignore lint/suspicious/noExplicitAny: the provider's wire format
        expect(limitOf(simulator.log.at(-1)!.body as any), JSON.stringify({ asked, stream })).toBe(321);
      }
  });
});

describe('in the ledger', () => {
  let database: TestDatabase;
  let store: Store;
  beforeAll(async () => {
    database = await createTestDatabase('sqlite');
    store = await database.open();
  });
  afterAll(() => database.drop());

  test('a whole answer cut before message_delta is a usage record marked inexact, its output estimated', async () => {
    const anthropic = await startAnthropicSimulator();
    const app = await ledgerApp(anthropic.url, store);
    try {
      anthropic.script({ text: bonjour, usage: { input_tokens: 7 }, resetBeforeUsage: true, delayMs: 20 });
      const res = await app.inject({
        method: 'POST',
        url: '/v1/chat/completions',
        payload: { model: CLAUDE, messages: hi },
      });
      expect(res.statusCode).toBe(502);
      const record = await findUsageRecord(store, String(res.headers['x-request-id']));
      expect(record?.usage).toEqual(usage({ inputTokens: 7, outputTokens: 4 }));
      expect(res.json().error.details.billed).toMatchObject({
        prompt_tokens: 7,
        completion_tokens: 4,
        cost_details: { total_pico_usd: record?.cost.totalPicoUsd.toString() },
      });
    } finally {
      await app.close();
      await anthropic.close();
    }
  });
});
