import type OpenAI from 'openai';
import { describe, expect, test } from 'vitest';
import { collect, failure, useHarness } from './gateway-harness.js';

/**
 * `reasoning_effort` as Claude's extended thinking, through the gateway with the official client:
 * the budget leaves the answer room, the thinking is not content, its tokens are billed as output
 * and reported as reasoning, and tool loops keep working.
 */
const MODEL = 'anthropic/claude-sonnet-4.5';
/** 44 bytes: 11 reasoning tokens as estimated. */
const THINKING = 'The user wants a greeting; one word will do.';

const h = useHarness();

const sent = () => h.anthropic.log.at(-1)!.body;

/**
 * A weather tool loop at low effort: the call, sent with thinking, then the turn with its result
 * and the assistant's message as `kept` returns it, answered.
 */
async function weatherLoop(
  kept: (message: OpenAI.Chat.ChatCompletionMessage) => OpenAI.Chat.ChatCompletionMessageParam,
) {
  const tools: OpenAI.Chat.ChatCompletionTool[] = [
    { type: 'function', function: { name: 'weather', parameters: { type: 'object' } } },
  ];
  const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Weather?' }];
  const ask = () =>
    h.client.chat.completions.create({ model: MODEL, messages, tools, reasoning_effort: 'low' });
  h.anthropic.script({ thinking: THINKING, toolCalls: [{ name: 'weather', arguments: {} }] });
  const message = (await ask()).choices[0]!.message;
  expect(sent().thinking).toMatchObject({ type: 'enabled' });
  messages.push(kept(message), { role: 'tool', tool_call_id: message.tool_calls![0]!.id, content: 'Sunny' });
  h.anthropic.script({ text: 'Sunny.' });
  expect((await ask()).choices[0]!.message.content).toBe('Sunny.');
}

describe('reasoning_effort for Claude', () => {
  test('high with max_tokens 10,000: 8,000 tokens of thinking, no temperature or top_k; the thinking is not content, its tokens are reasoning', async () => {
    h.anthropic.script({
      thinking: THINKING,
      text: 'Hello.',
      usage: { input_tokens: 12, output_tokens: 30 },
    });
    const answer = await h.client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Greet me.' }],
      reasoning_effort: 'high',
      max_tokens: 10_000,
      temperature: 0.3,
      top_p: 0.5,
      top_k: 40,
    } as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming);
    expect(sent()).toMatchObject({ max_tokens: 10_000, thinking: { type: 'enabled', budget_tokens: 8_000 } });
    for (const field of ['temperature', 'top_p', 'top_k']) expect(sent()).not.toHaveProperty(field);
    expect(answer.choices[0]!.message.content).toBe('Hello.');
    expect(answer.choices[0]!.message).toMatchObject({
      reasoning: THINKING,
      reasoning_details: [
        { type: 'reasoning.text', text: THINKING, signature: expect.stringMatching(/^sig_/), index: 0 },
      ],
    });
    // Anthropic's 30 output tokens are the thinking's and the answer's: all billed, 11 reported as reasoning.
    expect(answer.usage).toMatchObject({
      completion_tokens: 30,
      completion_tokens_details: { reasoning_tokens: 11 },
    });
    expect(h.recorder.entries[0]!.usage).toMatchObject({ outputTokens: 19, reasoningTokens: 11 });
  });

  test('streamed: no thinking in the deltas, the reasoning tokens in the final usage', async () => {
    h.anthropic.script({
      thinking: THINKING,
      text: ['Hel', 'lo.'],
      usage: { input_tokens: 12, output_tokens: 30 },
    });
    const chunks = await collect(
      await h.client.chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: 'Greet me.' }],
        reasoning_effort: 'medium',
        stream: true,
        stream_options: { include_usage: true },
      }),
    );
    const deltas = chunks.map((chunk) => chunk.choices[0]?.delta as Record<string, unknown> | undefined);
    expect(deltas.map((delta) => delta?.content ?? '').join('')).toBe('Hello.');
    // The thinking comes apart, as OpenRouter streams it: delta.reasoning and delta.reasoning_details.
    expect(deltas.map((delta) => delta?.reasoning ?? '').join('')).toBe(THINKING);
    expect(deltas.flatMap((delta) => (delta?.reasoning_details as object[] | undefined) ?? [])).toEqual([
      { type: 'reasoning.text', text: THINKING, index: 0, format: 'anthropic-claude-v1' },
      {
        type: 'reasoning.text',
        signature: expect.stringMatching(/^sig_/),
        index: 0,
        format: 'anthropic-claude-v1',
      },
    ]);
    expect(chunks.at(-1)!.usage).toMatchObject({
      completion_tokens: 30,
      completion_tokens_details: { reasoning_tokens: 11 },
    });
    // Without max_tokens the model's 64,000 (the double admits them all): half of it for medium.
    expect(sent().thinking).toEqual({ type: 'enabled', budget_tokens: 32_000 });
  });

  test.each<[string, number, object | undefined]>([
    ['minimal at 20,000: 10% is 2,000', 20_000, { type: 'enabled', budget_tokens: 2_000 }],
    [
      'minimal at 5,000: 10% is below 1,024, Anthropic’s least',
      5_000,
      { type: 'enabled', budget_tokens: 1_024 },
    ],
    ['minimal at 2,000: 1,024 would leave the answer less than 1,024, so no thinking', 2_000, undefined],
  ])('%s', async (_name, maxTokens, thinking) => {
    await h.client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Hi' }],
      reasoning_effort: 'minimal',
      max_tokens: maxTokens,
    });
    expect(sent().thinking).toEqual(thinking);
  });

  test('none, or no effort: no thinking, temperature sent as before', async () => {
    for (const effort of ['none', undefined] as const) {
      await h.client.chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: 'Hi' }],
        temperature: 0.3,
        ...(effort && { reasoning_effort: effort }),
      } as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming);
      expect(sent()).not.toHaveProperty('thinking');
      expect(sent().temperature).toBe(0.3);
    }
  });

  test('with tool_choice forcing a call, a 400 naming reasoning_effort (Anthropic thinks only with auto or none)', async () => {
    const error = await failure(
      h.client.chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: 'Weather?' }],
        reasoning_effort: 'low',
        tools: [{ type: 'function', function: { name: 'weather', parameters: { type: 'object' } } }],
        tool_choice: 'required',
      }),
    );
    expect(error.status).toBe(400);
    expect(JSON.stringify(error.error)).toContain('reasoning_effort');
    expect(h.anthropic.log).toHaveLength(0);
  });

  test('a tool loop given its reasoning_details back: the thinking block goes back signed, and the loop thinks on', async () => {
    // The message as it came, reasoning_details included, as an agent appends it.
    await weatherLoop((message) => message);
    expect(sent().thinking).toMatchObject({ type: 'enabled' });
    expect(sent().messages[1].content[0]).toEqual({
      type: 'thinking',
      thinking: THINKING,
      signature: expect.stringMatching(/^sig_/),
    });
  });
  test('a tool loop: the call is answered with thinking, the turn with its result without (the client kept no thinking block), and served', async () => {
    // A client keeping only the OpenAI fields of the message.
    await weatherLoop(({ role, content, tool_calls }) => ({ role, content, tool_calls }));
    expect(sent()).not.toHaveProperty('thinking');
  });
});

describe('reasoning_effort for Claude models that think adaptively (Claude 4.6 and later)', () => {
  const ADAPTIVE = 'anthropic/claude-sonnet-5.5';
  const ask = (body: Record<string, unknown>) =>
    h.client.chat.completions.create({
      model: ADAPTIVE,
      messages: [{ role: 'user', content: 'Greet me.' }],
      ...body,
    } as unknown as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming);

  test('each effort is sent as adaptive thinking with output_config.effort, never a budget the model refuses', async () => {
    for (const [effort, anthropic] of [
      ['minimal', 'low'],
      ['low', 'low'],
      ['medium', 'medium'],
      ['high', 'high'],
      ['xhigh', 'high'],
    ]) {
      h.anthropic.script({
        thinking: THINKING,
        text: 'Hello.',
        usage: { input_tokens: 12, output_tokens: 30 },
      });
      const answer = await ask({ reasoning_effort: effort, max_tokens: 10_000, temperature: 0.3 });
      expect(sent()).toMatchObject({
        max_tokens: 10_000,
        thinking: { type: 'adaptive' },
        output_config: { effort: anthropic },
      });
      expect(sent().thinking).not.toHaveProperty('budget_tokens');
      expect(sent()).not.toHaveProperty('temperature');
      expect(answer.choices[0]!.message).toMatchObject({ content: 'Hello.', reasoning: THINKING });
      expect(answer.usage).toMatchObject({
        completion_tokens: 30,
        completion_tokens_details: { reasoning_tokens: 11 },
      });
    }
  });

  test('with a JSON schema, the effort goes beside the format in one output_config', async () => {
    h.anthropic.script({ text: '{"ok":true}', usage: { input_tokens: 12, output_tokens: 5 } });
    const schema = { type: 'object', properties: { ok: { type: 'boolean' } }, additionalProperties: false };
    await ask({
      reasoning_effort: 'low',
      response_format: { type: 'json_schema', json_schema: { name: 'answer', schema } },
    });
    expect(sent().output_config).toEqual({ format: { type: 'json_schema', schema }, effort: 'low' });
  });

  test('none, or no effort: no thinking or effort is sent', async () => {
    for (const body of [{ reasoning_effort: 'none' }, {}]) {
      h.anthropic.script({ text: 'Hello.', usage: { input_tokens: 12, output_tokens: 2 } });
      await ask(body);
      expect(sent()).not.toHaveProperty('thinking');
      expect(sent()).not.toHaveProperty('output_config');
    }
  });

  test('the simulator refuses a thinking budget for such a model, as Anthropic does', async () => {
    const response = await fetch(`${h.anthropic.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': 'test', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({
        model: 'claude-sonnet-5-5',
        max_tokens: 4096,
        thinking: { type: 'enabled', budget_tokens: 2048 },
        messages: [{ role: 'user', content: 'hi' }],
      }),
    });
    expect(response.status).toBe(400);
    expect(JSON.stringify(await response.json())).toContain(
      'thinking.type.enabled is not supported for this model',
    );
  });
});
