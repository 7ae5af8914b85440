import fc from 'fast-check';
import { expect, test } from 'vitest';
import { streamChunks } from '../../src/providers/openai-response.js';
import type { ChatCompletionChunk, FinishReason } from '../../src/providers/openai-types.js';
import type { StreamPart, TokenUsage } from '../../src/providers/types.js';
import { usageCost } from '../../src/services/chat-contracts.js';

// Ids and model names with characters JSON must escape.
const identity = { id: 'chatcmpl-"quoted"\\', created: 1_790_000_000, model: 'anthropic/claude\u2028sonnet' };
const chunks = streamChunks(identity);
const shared = {
  id: identity.id,
  object: 'chat.completion.chunk' as const,
  created: identity.created,
  model: identity.model,
};

const choice = (
  delta: ChatCompletionChunk['choices'][number]['delta'],
  finishReason: FinishReason | null,
): ChatCompletionChunk => ({
  ...shared,
  choices: [{ index: 0, delta, finish_reason: finishReason, logprobs: null }],
});

test('the opening chunk names the assistant role with empty content', () => {
  expect(JSON.parse(chunks.opening())).toStrictEqual(choice({ role: 'assistant', content: '' }, null));
});

test('a delta carries only what it has: content, tool calls, or both', () => {
  const toolCalls = [
    { index: 0, id: 'call_1', type: 'function' as const, function: { name: 'f', arguments: '{"a":' } },
  ];
  const cases: Array<[StreamPart, ChatCompletionChunk]> = [
    [{ type: 'delta', content: 'Hel"lo\n\u0000' }, choice({ content: 'Hel"lo\n\u0000' }, null)],
    [{ type: 'delta', toolCalls }, choice({ tool_calls: toolCalls }, null)],
    [{ type: 'delta', content: '', toolCalls }, choice({ content: '', tool_calls: toolCalls }, null)],
    [{ type: 'delta', refusal: "I can't." }, choice({ refusal: "I can't." }, null)],
    [{ type: 'delta' }, choice({}, null)],
  ];
  for (const [part, expected] of cases) expect(JSON.parse(chunks.part(part))).toStrictEqual(expected);
});

test("a delta's log probabilities are its chunk's", () => {
  const logprobs = {
    content: [{ token: 'Hi', logprob: -0.1, bytes: [72, 105], top_logprobs: [] }],
    refusal: null,
  };
  expect(JSON.parse(chunks.part({ type: 'delta', content: 'Hi', logprobs }))).toStrictEqual({
    ...shared,
    choices: [{ index: 0, delta: { content: 'Hi' }, finish_reason: null, logprobs }],
  });
});

test('the finish chunk has an empty delta and the reason', () => {
  for (const reason of ['stop', 'length', 'tool_calls', 'content_filter'] as const)
    expect(JSON.parse(chunks.part({ type: 'finish', finishReason: reason }))).toStrictEqual(
      choice({}, reason),
    );
});

test('the finish chunk states the usage and its cost when given them', () => {
  const usage: TokenUsage = {
    inputTokens: 4,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
    outputTokens: 2,
    reasoningTokens: 0,
  };
  const cost = usageCost({
    total: '0.000006',
    provider: '0.000005',
    commission: '0.000001',
    totalPicoUsd: '6000000',
    providerPicoUsd: '5000000',
    commissionPicoUsd: '1000000',
  });
  expect(JSON.parse(chunks.part({ type: 'finish', finishReason: 'stop' }, { usage, cost }))).toMatchObject({
    ...choice({}, 'stop'),
    usage: {
      prompt_tokens: 4,
      completion_tokens: 2,
      total_tokens: 6,
      cost: 0.000006,
      cost_details: {
        total_usd: '0.000006',
        provider_usd: '0.000005',
        commission_usd: '0.000001',
        total_pico_usd: '6000000',
        provider_pico_usd: '5000000',
        commission_pico_usd: '1000000',
      },
    },
  });
});

test('the usage chunk has no choices, and the usage with its cost', () => {
  const usage: TokenUsage = {
    inputTokens: 10,
    cacheReadTokens: 3,
    cacheWriteTokens: 2,
    outputTokens: 7,
    reasoningTokens: 1,
  };
  const cost = usageCost({
    total: '0.000066',
    provider: '0.00006',
    commission: '0.000006',
    totalPicoUsd: '66000000',
    providerPicoUsd: '60000000',
    commissionPicoUsd: '6000000',
  });
  expect(JSON.parse(chunks.usage(usage, cost))).toStrictEqual({
    ...shared,
    choices: [],
    usage: {
      prompt_tokens: 15,
      completion_tokens: 8,
      total_tokens: 23,
      prompt_tokens_details: { cached_tokens: 3, cache_write_tokens: 2 },
      completion_tokens_details: { reasoning_tokens: 1 },
      ...cost,
    },
  });
});

test('usage.cost is the exact total as the nearest number in USD, the exact amounts beside it', () => {
  const stated = (total: string, totalPicoUsd: string) =>
    usageCost({
      total,
      provider: total,
      commission: '0',
      totalPicoUsd,
      providerPicoUsd: totalPicoUsd,
      commissionPicoUsd: '0',
    });
  expect(stated('0.000000000001', '1')).toMatchObject({
    cost: 1e-12,
    cost_details: { total_usd: '0.000000000001' },
  });
  expect(stated('0.1', '100000000000').cost).toBe(0.1);
  expect(stated('0.0001749', '174900000').cost).toBe(0.0001749);
  expect(stated('0', '0')).toMatchObject({ cost: 0, cost_details: { total_pico_usd: '0' } });
});

test('any text in a delta comes back exactly as it went in', () => {
  fc.assert(
    fc.property(fc.string({ unit: 'binary' }), (text) => {
      expect(JSON.parse(chunks.part({ type: 'delta', content: text })).choices[0].delta.content).toBe(text);
    }),
  );
});
