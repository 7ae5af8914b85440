import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type AnthropicStep, startAnthropicSimulator } from '../../devkit/simulators/anthropic.js';
import type { Simulator } from '../../devkit/simulators/simulator-server.js';
import { buildApp } from '../../src/app.js';
import { openStore, type Store } from '../../src/store/database.js';
import { gateDouble } from '../support/chat-doubles.js';
import { testConfig } from '../support/config.js';
import { failure, useHarness } from './gateway-harness.js';

/**
 * Anthropic prompt caching through the gateway with the official client: `cache_control` as
 * OpenRouter and LiteLLM clients mark it reaches Anthropic's blocks and tools, the simulator reads
 * and writes its cache as Anthropic does, and the ledger prices reads and writes at the catalog's
 * cache prices.
 */
const MODEL = 'anthropic/claude-sonnet-4.5';
const PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
/** Long enough (1,500 tokens as the simulator counts) for Anthropic to cache. */
const LONG_INSTRUCTIONS = 'Follow the house style. '.repeat(375).trim();
const ephemeral = { type: 'ephemeral' as const };
const tool = {
  type: 'function' as const,
  function: { name: 'search', parameters: { type: 'object', properties: { q: { type: 'string' } } } },
};

const h = useHarness();

/** LiteLLM's and OpenRouter's fields, which the openai types do not know. */
type Marked = OpenAI.Chat.ChatCompletionCreateParamsNonStreaming;

describe('cache_control from the client', () => {
  test('on system, user and assistant text parts, an image, a message and a tool: on the Anthropic blocks and tool they stand for', async () => {
    await h.client.chat.completions.create({
      model: MODEL,
      messages: [
        {
          role: 'system',
          content: [
            { type: 'text', text: 'Be terse.' },
            { type: 'text', text: LONG_INSTRUCTIONS, cache_control: ephemeral },
          ],
        },
        {
          role: 'user',
          content: [
            {
              type: 'image_url',
              image_url: { url: `data:image/png;base64,${PNG}` },
              cache_control: ephemeral,
            },
          ],
        },
        { role: 'assistant', content: 'A pixel.', cache_control: { type: 'ephemeral', ttl: '5m' } },
        { role: 'user', content: 'Again?' },
      ],
      tools: [{ ...tool, cache_control: ephemeral }],
    } as unknown as Marked);
    const sent = h.anthropic.log.at(-1)!.body;
    expect(sent.tools[0]).toMatchObject({ name: 'search', cache_control: ephemeral });
    expect(sent.system).toEqual([
      { type: 'text', text: 'Be terse.' },
      { type: 'text', text: LONG_INSTRUCTIONS, cache_control: ephemeral },
    ]);
    expect(sent.messages).toEqual([
      {
        role: 'user',
        content: [
          {
            type: 'image',
            source: { type: 'base64', media_type: 'image/png', data: PNG },
            cache_control: ephemeral,
          },
        ],
      },
      { role: 'assistant', content: [{ type: 'text', text: 'A pixel.', cache_control: ephemeral }] },
      { role: 'user', content: [{ type: 'text', text: 'Again?' }] },
    ]);
  });

  test('a tool result marked as a message carries the breakpoint on its tool_result block', async () => {
    await h.client.chat.completions.create({
      model: MODEL,
      messages: [
        { role: 'user', content: 'Search.' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'toolu_1', type: 'function', function: { name: 'search', arguments: '{}' } }],
        },
        { role: 'tool', tool_call_id: 'toolu_1', content: 'Found it.', cache_control: ephemeral },
      ],
      tools: [tool],
    } as unknown as Marked);
    expect(h.anthropic.log.at(-1)!.body.messages.at(-1)).toEqual({
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: 'toolu_1', content: 'Found it.', cache_control: ephemeral },
      ],
    });
  });

  test('more than 4 breakpoints is a 400 naming cache_control, before anything is sent', async () => {
    const marked = (text: string) => ({ type: 'text' as const, text, cache_control: ephemeral });
    const error = await failure(
      h.client.chat.completions.create({
        model: MODEL,
        messages: [
          { role: 'system', content: [marked('a'), marked('b')] },
          { role: 'user', content: [marked('c'), marked('d'), marked('e')] },
        ],
      } as unknown as Marked),
    );
    expect(error.status).toBe(400);
    expect(error.message).toContain('at most 4');
    expect((error.error as { param?: string }).param ?? JSON.stringify(error.error)).toContain(
      'cache_control',
    );
    expect(h.anthropic.log).toHaveLength(0);
  });

  test("a 1-hour breakpoint is a 400 naming it: its write price (2x input) is not the catalog's cacheWrite", async () => {
    const error = await failure(
      h.client.chat.completions.create({
        model: MODEL,
        messages: [
          {
            role: 'user',
            content: [{ type: 'text', text: 'Hi', cache_control: { type: 'ephemeral', ttl: '1h' } }],
          },
        ],
      } as unknown as Marked),
    );
    expect(error.status).toBe(400);
    expect(JSON.stringify(error.error)).toContain('messages[0].content[0].cache_control.ttl');
    expect(h.anthropic.log).toHaveLength(0);
  });

  test('Gemini caches implicitly: cache_control is accepted and not sent', async () => {
    await h.client.chat.completions.create({
      model: 'google/gemini-2.5-flash',
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Hi', cache_control: ephemeral }] }],
    } as unknown as Marked);
    expect(JSON.stringify(h.gemini.log.at(-1)!.body)).not.toContain('cache_control');
  });
});

/** A gateway on its own ledger (SQLite in memory), its Anthropic simulator, ANTHROPIC_AUTO_CACHE as given. */
async function ledgerGateway(autoCache: boolean) {
  const anthropic: Simulator<AnthropicStep> = await startAnthropicSimulator();
  const store: Store = openStore(':memory:');
  const app: FastifyInstance = await buildApp(
    testConfig({
      providers: {
        anthropic: { apiKey: 'sk-ant-test', baseUrl: anthropic.url, autoCache },
        google: { apiKey: 'gemini-test', baseUrl: 'http://127.0.0.1:9' },
      },
    }),
    { gate: gateDouble(), checks: [], store },
  );
  await app.listen({ port: 0, host: '127.0.0.1' });
  const port = (app.server.address() as AddressInfo).port;
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'unused', maxRetries: 0 });
  const records = () =>
    store.db
      .selectFrom('usage_records')
      .select([
        'input_tokens',
        'cache_read_tokens',
        'cache_write_tokens',
        'output_tokens',
        'provider_cost_pico',
        'commission_pico',
        'total_pico',
      ])
      .orderBy('created_at')
      .execute();
  return {
    anthropic,
    client,
    records,
    async close() {
      await app.close();
      await store.close();
      await anthropic.close();
    },
  };
}

describe('cache reads and writes in usage and in the ledger', () => {
  let g: Awaited<ReturnType<typeof ledgerGateway>>;
  beforeAll(async () => {
    g = await ledgerGateway(false);
  });
  afterAll(() => g.close());

  test('a marked prefix is written the first time and read the second, billed at Sonnet 4.5 cache prices exactly', async () => {
    const ask = () =>
      g.client.chat.completions.create({
        model: MODEL,
        messages: [
          { role: 'system', content: [{ type: 'text', text: LONG_INSTRUCTIONS, cache_control: ephemeral }] },
          { role: 'user', content: 'Hi' },
        ],
      } as unknown as Marked);
    const first = await ask();
    const second = await ask();
    // 1,500 instruction tokens, 1 of the user's, 2 of output ("echo: Hi").
    expect(first.usage).toMatchObject({
      prompt_tokens: 1501,
      prompt_tokens_details: { cached_tokens: 0, cache_write_tokens: 1500 },
      completion_tokens: 2,
    });
    expect(second.usage).toMatchObject({
      prompt_tokens: 1501,
      prompt_tokens_details: { cached_tokens: 1500, cache_write_tokens: 0 },
    });
    // Sonnet 4.5 per token: input $3, cache write $3.75, cache read $0.30, output $15 per million
    // (pico-USD: 3e6, 3.75e6, 0.3e6, 15e6); commission 10%.
    expect(await g.records()).toEqual([
      {
        input_tokens: 1n,
        cache_read_tokens: 0n,
        cache_write_tokens: 1500n,
        output_tokens: 2n,
        provider_cost_pico: 3_000_000n + 1500n * 3_750_000n + 2n * 15_000_000n,
        commission_pico: 565_800_000n,
        total_pico: 6_223_800_000n,
      },
      {
        input_tokens: 1n,
        cache_read_tokens: 1500n,
        cache_write_tokens: 0n,
        output_tokens: 2n,
        provider_cost_pico: 3_000_000n + 1500n * 300_000n + 2n * 15_000_000n,
        commission_pico: 48_300_000n,
        total_pico: 531_300_000n,
      },
    ]);
  });
});

describe('ANTHROPIC_AUTO_CACHE', () => {
  let g: Awaited<ReturnType<typeof ledgerGateway>>;
  beforeAll(async () => {
    g = await ledgerGateway(true);
  });
  afterAll(() => g.close());

  const conversation = (turns: number): OpenAI.Chat.ChatCompletionMessageParam[] => [
    { role: 'system', content: LONG_INSTRUCTIONS },
    ...Array.from({ length: turns }, (_, i): OpenAI.Chat.ChatCompletionMessageParam[] => [
      { role: 'user', content: `Question ${i}` },
      { role: 'assistant', content: `Answer ${i}` },
    ]).flat(),
    { role: 'user', content: 'Next question' },
  ];

  test('a request marking nothing gets breakpoints after its instructions and its history, not on its final turn; the next turn reads them', async () => {
    await g.client.chat.completions.create({ model: MODEL, messages: conversation(1), tools: [tool] });
    const sent = g.anthropic.log.at(-1)!.body;
    expect(sent.tools[0]).not.toHaveProperty('cache_control');
    expect(sent.system).toEqual([{ type: 'text', text: LONG_INSTRUCTIONS, cache_control: ephemeral }]);
    expect(
      sent.messages.map(
        (m: { content: Array<{ cache_control?: unknown }> }) => m.content.at(-1)!.cache_control,
      ),
    ).toEqual([undefined, ephemeral, undefined]);

    const next = await g.client.chat.completions.create({
      model: MODEL,
      messages: conversation(2),
      tools: [tool],
    });
    // The prefix through "Answer 0" was written by the first request: read now.
    const [first, second] = await g.records();
    expect(first!.cache_write_tokens).toBeGreaterThan(1500n);
    expect(second!.cache_read_tokens).toBe(first!.cache_write_tokens);
    expect(second!.cache_write_tokens).toBe(4n); // "Question 1", "Answer 1"
    expect(next.usage?.prompt_tokens_details?.cached_tokens).toBe(Number(first!.cache_write_tokens));
  });

  test('a request marking its own breakpoints gets only those', async () => {
    await g.client.chat.completions.create({
      model: MODEL,
      messages: [
        { role: 'system', content: LONG_INSTRUCTIONS },
        { role: 'user', content: 'Hi' },
        { role: 'assistant', content: 'Hello' },
        { role: 'user', content: [{ type: 'text', text: 'Bye', cache_control: ephemeral }] },
      ],
    } as unknown as Marked);
    const sent = g.anthropic.log.at(-1)!.body;
    expect(JSON.stringify(sent).match(/cache_control/g)).toHaveLength(1);
    expect(sent.messages.at(-1).content[0]).toEqual({ type: 'text', text: 'Bye', cache_control: ephemeral });
  });
});
