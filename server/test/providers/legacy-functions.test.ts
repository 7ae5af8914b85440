import type OpenAI from 'openai';
import { describe, expect, test } from 'vitest';
import { collect, failure, useHarness } from './gateway-harness.js';

/**
 * Legacy function calling (`functions`, `function_call`, the `function` role) through the gateway
 * with the official client: sent as tools, answered in the legacy shape, as OpenAI answers it.
 */
const h = useHarness();

const getWeather = {
  name: 'get_weather',
  description: 'Current weather of a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};

/** A conversation that called get_weather the legacy way and has its result. */
const history: OpenAI.Chat.ChatCompletionMessageParam[] = [
  { role: 'user', content: 'Weather in Oslo?' },
  { role: 'assistant', content: null, function_call: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
  { role: 'function', name: 'get_weather', content: '{"celsius":-3}' },
];

describe('legacy functions', () => {
  test('Claude: functions go as tools, function_call as tool_choice, one call at most; the answer is message.function_call with finish_reason function_call', async () => {
    h.anthropic.script({ toolCalls: [{ name: 'get_weather', arguments: { city: 'Oslo' } }] });
    const answer = await h.client.chat.completions.create({
      model: 'anthropic/claude-sonnet-4.5',
      messages: [{ role: 'user', content: 'Weather in Oslo?' }],
      functions: [getWeather],
      function_call: { name: 'get_weather' },
    });
    expect(answer.choices[0]).toMatchObject({
      message: {
        role: 'assistant',
        content: null,
        function_call: { name: 'get_weather', arguments: '{"city":"Oslo"}' },
      },
      finish_reason: 'function_call',
    });
    expect(answer.choices[0]!.message).not.toHaveProperty('tool_calls');
    const sent = h.anthropic.log.at(-1)!.body;
    expect(sent.tools).toEqual([
      {
        name: 'get_weather',
        description: 'Current weather of a city',
        input_schema: getWeather.parameters,
      },
    ]);
    expect(sent.tool_choice).toEqual({ type: 'tool', name: 'get_weather', disable_parallel_tool_use: true });
  });

  test('Claude: the legacy history (an assistant function_call, a function message) is a tool_use and its tool_result', async () => {
    h.anthropic.script({ text: 'It is -3 °C in Oslo.' });
    const answer = await h.client.chat.completions.create({
      model: 'anthropic/claude-sonnet-4.5',
      messages: history,
      functions: [getWeather],
    });
    expect(answer.choices[0]).toMatchObject({
      message: { content: 'It is -3 °C in Oslo.' },
      finish_reason: 'stop',
    });
    const [, call, result] = h.anthropic.log.at(-1)!.body.messages;
    expect(call).toEqual({
      role: 'assistant',
      content: [{ type: 'tool_use', id: expect.any(String), name: 'get_weather', input: { city: 'Oslo' } }],
    });
    expect(result).toEqual({
      role: 'user',
      content: [{ type: 'tool_result', tool_use_id: call.content[0].id, content: '{"celsius":-3}' }],
    });
  });

  test('Gemini streamed: the call arrives as delta.function_call pieces, the finish as function_call', async () => {
    h.gemini.script({ toolCalls: [{ name: 'get_weather', arguments: { city: 'Oslo' } }] });
    const chunks = await collect(
      await h.client.chat.completions.create({
        model: 'google/gemini-2.5-flash',
        messages: history,
        functions: [getWeather],
        function_call: 'auto',
        stream: true,
      }),
    );
    const deltas = chunks.map((chunk) => chunk.choices[0]?.delta);
    expect(deltas.some((delta) => delta && 'tool_calls' in delta)).toBe(false);
    const calls = deltas.flatMap((delta) => (delta?.function_call ? [delta.function_call] : []));
    expect(calls[0]!.name).toBe('get_weather');
    expect(calls.map((call) => call.arguments ?? '').join('')).toBe('{"city":"Oslo"}');
    expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe('function_call');
    const sent = h.gemini.log.at(-1)!.body;
    expect(sent.contents.slice(1)).toEqual([
      { role: 'model', parts: [{ functionCall: { name: 'get_weather', args: { city: 'Oslo' } } }] },
      {
        role: 'user',
        parts: [{ functionResponse: { name: 'get_weather', response: { celsius: -3 } } }],
      },
    ]);
    expect(sent.toolConfig).toEqual({ functionCallingConfig: { mode: 'AUTO' } });
  });

  test('an OpenAI-compatible upstream is sent tools too (one translation for every family)', async () => {
    await h.client.chat.completions.create({
      model: 'local/llama-3.1-8b',
      messages: history,
      functions: [getWeather],
      function_call: 'none',
    });
    const sent = h.local.log.at(-1)!.body;
    expect(sent).not.toHaveProperty('functions');
    expect(sent).not.toHaveProperty('function_call');
    expect(sent.tools).toEqual([{ type: 'function', function: getWeather }]);
    expect(sent.tool_choice).toBe('none');
    expect(sent.messages.slice(1)).toEqual([
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          {
            id: 'call_function_0',
            type: 'function',
            function: { name: 'get_weather', arguments: '{"city":"Oslo"}' },
          },
        ],
      },
      { role: 'tool', content: '{"celsius":-3}', tool_call_id: 'call_function_0' },
    ]);
  });

  test.each<[string, Record<string, unknown>, string]>([
    [
      'functions beside tools',
      { functions: [getWeather], tools: [{ type: 'function', function: getWeather }] },
      'functions',
    ],
    [
      'a function message answering no earlier function_call',
      {
        messages: [
          { role: 'user', content: 'Hi' },
          { role: 'function', name: 'get_weather', content: '{}' },
        ],
      },
      'messages[1].name',
    ],
    ['function_call not none, auto or {name}', { function_call: 'required' }, 'function_call'],
  ])('%s is a 400 naming %s', async (_name, fields, field) => {
    const error = await failure(
      h.client.chat.completions.create({
        model: 'anthropic/claude-sonnet-4.5',
        messages: [{ role: 'user', content: 'Hi' }],
        ...fields,
      } as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming),
    );
    expect(error.status).toBe(400);
    expect(JSON.stringify(error.error)).toContain(field);
    expect(h.anthropic.log).toHaveLength(0);
  });
});
