import { request } from 'node:http';
import type OpenAI from 'openai';
import { describe, expect, test } from 'vitest';
import { JSON_MODE_INSTRUCTION } from '../../src/providers/message-parts.js';
import { usageCost } from '../../src/services/chat-contracts.js';
import { statedCost, TEST_PAYER } from '../support/chat-doubles.js';
import { collect, report, useHarness, weatherReport } from './gateway-harness.js';

const MODEL = 'anthropic/claude-sonnet-4.5';
const PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
const weatherTool = {
  type: 'function' as const,
  function: {
    name: 'get_weather',
    description: 'Current weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};

/** An assistant's call of get_weather for Oslo, under `id`. */
const weatherCall = (id: string) => ({
  id,
  type: 'function' as const,
  function: { name: 'get_weather', arguments: '{"city":"Oslo"}' },
});

const h = useHarness();

const lastSent = () => h.anthropic.log.at(-1)!;

describe('Anthropic behind /v1/chat/completions', () => {
  test('a completion: the Messages API request, the OpenAI answer, usage in disjoint buckets, the cost', async () => {
    h.anthropic.script({
      text: 'Hello there.',
      usage: {
        input_tokens: 12,
        output_tokens: 3,
        cache_read_input_tokens: 5,
        cache_creation_input_tokens: 7,
      },
    });
    const { data, response } = await h.client.chat.completions
      .create({
        model: MODEL,
        messages: [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: 'Hi' },
        ],
      })
      .withResponse();

    expect(data).toMatchObject({
      object: 'chat.completion',
      model: MODEL,
      choices: [{ index: 0, message: { role: 'assistant', content: 'Hello there.' }, finish_reason: 'stop' }],
      usage: {
        prompt_tokens: 24,
        completion_tokens: 3,
        total_tokens: 27,
        prompt_tokens_details: { cached_tokens: 5, cache_write_tokens: 7 },
        completion_tokens_details: { reasoning_tokens: 0 },
      },
    });
    expect(data.id).toMatch(/^chatcmpl-/);
    expect(response.headers.get('x-settlement')).toBe('none-due');
    const requestId = response.headers.get('x-request-id');

    const sent = lastSent();
    expect(sent.path).toBe('/v1/messages');
    expect(sent.headers['x-api-key']).toBe('sk-ant-test');
    expect(sent.headers['anthropic-version']).toBe('2023-06-01');
    expect(sent.body).toEqual({
      model: 'claude-sonnet-4-5',
      max_tokens: 64000,
      system: [{ type: 'text', text: 'Be brief.' }],
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Hi' }] }],
      // Streamed even for a client that asked for one JSON body, so that a cut answer is still counted.
      stream: true,
    });

    expect(h.recorder.entries).toEqual([
      {
        requestId,
        payer: TEST_PAYER,
        rail: 'session',
        model: expect.objectContaining({ id: MODEL }),
        usage: {
          inputTokens: 12,
          cacheReadTokens: 5,
          cacheWriteTokens: 7,
          outputTokens: 3,
          reasoningTokens: 0,
          exact: true,
        },
      },
    ]);
    const entry = h.recorder.entries[0]!;
    expect(data.usage).toMatchObject(usageCost(statedCost(entry)));
    expect(h.gate.released).toBe(h.gate.admitted.length);
  });

  test('a stream: one id, the role first, text deltas, then the finish with the usage and its cost, then [DONE]', async () => {
    h.anthropic.script({
      thinking: 'The user greets me.',
      text: ['Hel', 'lo', ' world'],
      usage: { input_tokens: 20, output_tokens: 9 },
    });
    const { data: stream, response } = await h.client.chat.completions
      .create({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], stream: true })
      .withResponse();
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(response.headers.get('cache-control')).toBe('no-cache');
    expect(response.headers.get('x-accel-buffering')).toBe('no');
    expect(response.headers.get('x-settlement')).toBe('none-due');
    const chunks = await collect(stream);

    expect(new Set(chunks.map((chunk) => chunk.id)).size).toBe(1);
    expect(chunks.every((chunk) => chunk.object === 'chat.completion.chunk' && chunk.model === MODEL)).toBe(
      true,
    );
    expect(chunks[0]!.choices[0]!.delta.role).toBe('assistant');
    expect(chunks.slice(1).some((chunk) => chunk.choices[0]?.delta.role !== undefined)).toBe(false);
    const text = chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join('');
    expect(text).toBe('Hello world');
    const withChoices = chunks.filter((chunk) => chunk.choices.length > 0);
    expect(withChoices.at(-1)!.choices[0]!.finish_reason).toBe('stop');
    expect(withChoices.slice(0, -1).every((chunk) => chunk.choices[0]!.finish_reason === null)).toBe(true);
    expect(chunks.slice(0, -1).every((chunk) => !chunk.usage)).toBe(true);

    // No include_usage asked: as OpenAI, every chunk has a choice; the finish states the usage.
    expect(chunks.every((chunk) => chunk.choices.length === 1)).toBe(true);
    const last = chunks.at(-1)!;
    expect(last.choices[0]!.finish_reason).toBe('stop');
    expect(last.usage).toMatchObject({ prompt_tokens: 20, completion_tokens: 9, total_tokens: 29 });
    expect(h.recorder.entries[0]!.usage).toEqual({
      inputTokens: 20,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
      // The thinking's 19 bytes, as estimated reasoning (Anthropic counts it in output_tokens).
      outputTokens: 4,
      reasoningTokens: 5,
      exact: true,
    });
    expect(last.usage).toMatchObject(usageCost(statedCost(h.recorder.entries[0]!)));
    expect(lastSent().body.stream).toBe(true);
  });

  test('a stream on a connection the client asked to close says connection: close', async () => {
    h.anthropic.script({ text: ['a'] });
    const headers = await new Promise<Record<string, unknown>>((resolve, reject) => {
      const sent = request(
        `${h.url}/v1/chat/completions`,
        { method: 'POST', headers: { 'content-type': 'application/json', connection: 'close' } },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.headers));
        },
      );
      sent.on('error', reject);
      sent.end(JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], stream: true }));
    });
    expect(headers['content-type']).toBe('text/event-stream; charset=utf-8');
    expect(headers.connection).toBe('close');
  });

  test('the raw event stream is framed as OpenAI frames it and ends with [DONE]', async () => {
    h.anthropic.script({ text: ['a', 'b'] });
    const res = await fetch(`${h.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], stream: true }),
    });
    expect(res.headers.get('connection')).toBe('keep-alive');
    const raw = await res.text();
    const events = raw.split('\n\n');
    expect(events.pop()).toBe('');
    expect(events.at(-1)).toBe('data: [DONE]');
    for (const event of events.slice(0, -1)) expect(event).toMatch(/^data: \{.*\}$/s);
    const finish = JSON.parse(events.at(-2)!.slice(6));
    expect(finish).toMatchObject({
      choices: [{ finish_reason: 'stop' }],
      usage: { cost: expect.any(Number), cost_details: expect.any(Object) },
    });
  });

  test('with stream_options.include_usage, the usage comes in a last chunk without choices, as OpenAI sends it', async () => {
    h.anthropic.script({ text: ['a', 'b'], usage: { input_tokens: 4, output_tokens: 2 } });
    const chunks = await collect(
      await h.client.chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: 'Hi' }],
        stream: true,
        stream_options: { include_usage: true },
      }),
    );
    const [finish, usage] = chunks.slice(-2);
    expect(finish).toMatchObject({ choices: [{ finish_reason: 'stop' }] });
    expect(finish!.usage).toBeUndefined();
    expect(usage).toMatchObject({ choices: [], usage: { prompt_tokens: 4, completion_tokens: 2 } });
    expect(chunks.slice(0, -1).every((chunk) => chunk.choices.length === 1)).toBe(true);
  });

  test('tools: a forced call comes back as tool_calls, and the result goes back as tool_result', async () => {
    h.anthropic.script({
      toolCalls: [{ id: 'toolu_01A', name: 'get_weather', arguments: { city: 'Paris' } }],
    });
    const first = await h.client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
      tools: [weatherTool],
      tool_choice: 'required',
    });
    const choice = first.choices[0]!;
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.content).toBeNull();
    expect(choice.message.tool_calls).toEqual([
      { id: 'toolu_01A', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
    ]);
    expect(lastSent().body).toMatchObject({
      tools: [
        {
          name: 'get_weather',
          description: 'Current weather of a city',
          input_schema: weatherTool.function.parameters,
        },
      ],
      tool_choice: { type: 'any' },
    });

    h.anthropic.script({ text: 'Sunny, 21°C.' });
    const second = await h.client.chat.completions.create({
      model: MODEL,
      messages: [
        { role: 'user', content: 'Weather in Paris?' },
        choice.message as OpenAI.Chat.Completions.ChatCompletionAssistantMessageParam,
        { role: 'tool', tool_call_id: 'toolu_01A', content: '{"temp":21}' },
      ],
      tools: [weatherTool],
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      parallel_tool_calls: false,
    });
    expect(second.choices[0]!.message.content).toBe('Sunny, 21°C.');
    expect(lastSent().body.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'Weather in Paris?' }] },
      {
        role: 'assistant',
        content: [{ type: 'tool_use', id: 'toolu_01A', name: 'get_weather', input: { city: 'Paris' } }],
      },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_01A', content: '{"temp":21}' }] },
    ]);
    expect(lastSent().body.tool_choice).toEqual({
      type: 'tool',
      name: 'get_weather',
      disable_parallel_tool_use: true,
    });
  });

  test('an empty tool result goes without content, and empty parts leave a result (Anthropic refuses empty text blocks)', async () => {
    const answer = await h.client.chat.completions.create({
      model: MODEL,
      messages: [
        { role: 'user', content: 'Weather in Oslo, three times?' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [weatherCall('toolu_a'), weatherCall('toolu_b'), weatherCall('toolu_c')],
        },
        { role: 'tool', tool_call_id: 'toolu_a', content: '' },
        { role: 'tool', tool_call_id: 'toolu_b', content: [{ type: 'text', text: '' }] },
        {
          role: 'tool',
          tool_call_id: 'toolu_c',
          content: [
            { type: 'text', text: '' },
            { type: 'text', text: 'snow' },
          ],
        },
      ],
      tools: [weatherTool],
    });
    expect(answer).toMatchObject({ object: 'chat.completion', choices: [{ finish_reason: 'stop' }] });
    expect(lastSent().body.messages.at(-1)).toEqual({
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: 'toolu_a' },
        { type: 'tool_result', tool_use_id: 'toolu_b' },
        { type: 'tool_result', tool_use_id: 'toolu_c', content: [{ type: 'text', text: 'snow' }] },
      ],
    });
  });

  test('tool parameters without type go as an object input_schema (Anthropic requires its type)', async () => {
    const answer = await h.client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'What time is it?' }],
      tools: [
        { type: 'function', function: { name: 'now', parameters: {} } },
        { type: 'function', function: { name: 'get_weather', parameters: { properties: { city: {} } } } },
        { type: 'function', function: { name: 'ping' } },
      ],
    });
    expect(answer).toMatchObject({ object: 'chat.completion', choices: [{ finish_reason: 'stop' }] });
    expect(lastSent().body.tools).toEqual([
      { name: 'now', input_schema: { type: 'object' } },
      { name: 'get_weather', input_schema: { type: 'object', properties: { city: {} } } },
      { name: 'ping', input_schema: { type: 'object', properties: {} } },
    ]);
  });

  test('tools in a stream: the call id and name first, then the arguments in pieces, OpenAI indexes', async () => {
    h.anthropic.script({
      text: 'Let me check.',
      toolCalls: [
        { id: 'toolu_1', name: 'get_weather', arguments: { city: 'Paris' } },
        { id: 'toolu_2', name: 'get_weather', arguments: { city: 'Rome' } },
      ],
    });
    const chunks = await collect(
      await h.client.chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: 'Paris and Rome?' }],
        tools: [weatherTool],
        stream: true,
      }),
    );
    const deltas = chunks.flatMap((chunk) => chunk.choices[0]?.delta.tool_calls ?? []);
    const starts = deltas.filter((delta) => delta.id !== undefined);
    expect(starts).toEqual([
      { index: 0, id: 'toolu_1', type: 'function', function: { name: 'get_weather', arguments: '' } },
      { index: 1, id: 'toolu_2', type: 'function', function: { name: 'get_weather', arguments: '' } },
    ]);
    const argumentsOf = (index: number) =>
      deltas
        .filter((delta) => delta.index === index)
        .map((delta) => delta.function?.arguments ?? '')
        .join('');
    expect(JSON.parse(argumentsOf(0))).toEqual({ city: 'Paris' });
    expect(JSON.parse(argumentsOf(1))).toEqual({ city: 'Rome' });
    expect(deltas.filter((delta) => delta.id === undefined).length).toBeGreaterThan(1);
    expect(chunks.filter((chunk) => chunk.choices.length > 0).at(-1)!.choices[0]!.finish_reason).toBe(
      'tool_calls',
    );
    expect(chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join('')).toBe('Let me check.');
  });

  test('images: a data URL becomes a base64 source, an http URL a url source', async () => {
    await h.client.chat.completions.create({
      model: MODEL,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Compare these.' },
            { type: 'image_url', image_url: { url: `data:image/png;base64,${PNG}` } },
            { type: 'image_url', image_url: { url: 'https://example.com/cat.jpg', detail: 'high' } },
          ],
        },
      ],
    });
    expect(lastSent().body.messages[0].content).toEqual([
      { type: 'text', text: 'Compare these.' },
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG } },
      { type: 'image', source: { type: 'url', url: 'https://example.com/cat.jpg' } },
    ]);
  });

  test('an image URL that is neither http nor data is a 400 naming the part; nothing reaches Anthropic', async () => {
    const error = await h.client.chat.completions
      .create({
        model: MODEL,
        messages: [
          { role: 'user', content: [{ type: 'image_url', image_url: { url: 'ftp://example.com/a.png' } }] },
        ],
      })
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ status: 400, error: { code: 'validation_error' } });
    expect((error as { error: { field: string } }).error.field).toBe('messages[0].content[0].image_url.url');
    expect(h.anthropic.log).toHaveLength(0);
    expect(h.recorder.entries).toHaveLength(0);
    expect(h.gate.released).toBe(h.gate.admitted.length);
  });

  test('an inline image of a type Anthropic does not take is a 400 naming the part, before any payment; nothing reaches Anthropic', async () => {
    const admitted = h.gate.admitted.length;
    for (const type of ['image/svg+xml', 'image/bmp', 'image/heic']) {
      const error = await h.client.chat.completions
        .create({
          model: MODEL,
          messages: [
            {
              role: 'user',
              content: [
                { type: 'text', text: 'What is this?' },
                { type: 'image_url', image_url: { url: `data:${type};base64,AAAA` } },
              ],
            },
          ],
        })
        .catch((e: unknown) => e);
      expect(error).toMatchObject({
        status: 400,
        error: {
          code: 'validation_error',
          field: 'messages[0].content[1].image_url.url',
          message:
            'messages[0].content[1].image_url.url must be a data URL of type image/jpeg, image/png, image/gif, or image/webp for Anthropic models',
        },
      });
    }
    expect(h.anthropic.log).toHaveLength(0);
    expect(h.gate.admitted).toHaveLength(admitted);
  });

  test.each([
    ['a line break', '\n'],
    ['one blank among others', ['END', ' \t']],
  ])(
    'a stop sequence of whitespace only (%s) is a 400 naming stop, before any payment; nothing reaches Anthropic',
    async (_, stop) => {
      const admitted = h.gate.admitted.length;
      const error = await h.client.chat.completions
        .create({ model: MODEL, messages: [{ role: 'user', content: 'List three colors.' }], stop })
        .catch((e: unknown) => e);
      expect(error).toMatchObject({
        status: 400,
        error: {
          code: 'validation_error',
          field: 'stop',
          message: 'stop must contain a non-whitespace character for Anthropic models',
        },
      });
      expect(h.anthropic.log).toHaveLength(0);
      expect(h.recorder.entries).toHaveLength(0);
      expect(h.gate.admitted).toHaveLength(admitted);
    },
  );

  test('tool call arguments nesting deeper than the gateway forwards are a 400 naming them, before any payment; nothing reaches Anthropic', async () => {
    const admitted = h.gate.admitted.length;
    const depth = 1_000;
    const error = await h.client.chat.completions
      .create({
        model: MODEL,
        messages: [
          { role: 'user', content: 'Weather?' },
          {
            role: 'assistant',
            content: null,
            tool_calls: [
              {
                id: 'call_1',
                type: 'function',
                function: { name: 'weather', arguments: `{"a":${'['.repeat(depth)}${']'.repeat(depth)}}` },
              },
            ],
          },
          { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
        ],
      })
      .catch((e: unknown) => e);
    expect(error).toMatchObject({
      status: 400,
      error: {
        code: 'validation_error',
        field: 'messages[1].tool_calls[0].function.arguments',
        message: 'messages[1].tool_calls[0].function.arguments must nest at most 64 levels deep',
      },
    });
    expect(h.anthropic.log).toHaveLength(0);
    expect(h.gate.admitted).toHaveLength(admitted);
  });

  test('a final assistant turn (a prefill) goes without trailing whitespace, which Anthropic refuses; earlier turns keep theirs', async () => {
    await h.client.chat.completions.create({
      model: MODEL,
      messages: [
        { role: 'user', content: 'Hi' },
        { role: 'assistant', content: 'Hello!  ' },
        { role: 'user', content: 'Name a color.' },
        {
          role: 'assistant',
          content: [
            { type: 'text', text: 'The color is \n' },
            { type: 'text', text: ' \n' },
          ],
        },
      ],
    });
    expect(lastSent().body.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'Hi' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'Hello!  ' }] },
      { role: 'user', content: [{ type: 'text', text: 'Name a color.' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'The color is' }] },
    ]);

    await h.client.chat.completions.create({
      model: MODEL,
      messages: [
        { role: 'user', content: 'Name a color.' },
        { role: 'assistant', content: ' \n ' },
      ],
    });
    expect(lastSent().body.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'Name a color.' }] },
    ]);
  });

  test('user goes as metadata.user_id up to the 256 characters Anthropic takes; a longer one is left out', async () => {
    await h.client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Hi' }],
      user: 'u'.repeat(256),
    });
    expect(lastSent().body.metadata).toEqual({ user_id: 'u'.repeat(256) });
    const answer = await h.client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Hi' }],
      user: 'u'.repeat(257),
    });
    expect(answer.object).toBe('chat.completion');
    expect(lastSent().body).not.toHaveProperty('metadata');
  });

  test('json mode is a system instruction; stop, temperature (capped at 1), top_k pass; penalties are dropped', async () => {
    h.anthropic.script({ text: '{"ok":true}', stop: 'stop_sequence', stopSequence: 'END' });
    const answer = await h.client.chat.completions.create({
      model: MODEL,
      messages: [
        { role: 'system', content: 'You are a JSON API.' },
        { role: 'user', content: 'Say ok.' },
      ],
      response_format: { type: 'json_object' },
      stop: ['END'],
      temperature: 1.5,
      top_p: 0.9,
      // @ts-expect-error top_k is not in the OpenAI types, but the gateway accepts it
      top_k: 40,
      presence_penalty: 0.5,
      frequency_penalty: 0.5,
      user: 'user-42',
    });
    expect(answer.choices[0]!.finish_reason).toBe('stop');
    expect(answer.choices[0]!.message.content).toBe('{"ok":true}');
    const body = lastSent().body;
    expect(body.system).toEqual([
      { type: 'text', text: 'You are a JSON API.' },
      { type: 'text', text: JSON_MODE_INSTRUCTION },
    ]);
    expect(body).toMatchObject({
      stop_sequences: ['END'],
      temperature: 1,
      top_k: 40,
      metadata: { user_id: 'user-42' },
    });
    expect(body).not.toHaveProperty('top_p');
    expect(body).not.toHaveProperty('presence_penalty');
    expect(body).not.toHaveProperty('frequency_penalty');
  });

  test('max_tokens is sent, and a max_tokens stop is finish_reason length (default simulator answer)', async () => {
    const answer = await h.client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'one two three four five six' }],
      max_tokens: 3,
    });
    expect(lastSent().body.max_tokens).toBe(3);
    expect(answer.choices[0]!.finish_reason).toBe('length');
    expect(answer.choices[0]!.message.content).toBe('echo: one two');
    expect(answer.usage!.completion_tokens).toBe(3);
  });

  test('max_completion_tokens (what OpenAI now documents) is taken as max_tokens is: sent as max_tokens', async () => {
    await h.client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Hi' }],
      max_completion_tokens: 7,
    });
    expect(lastSent().body.max_tokens).toBe(7);
    expect(lastSent().body).not.toHaveProperty('max_completion_tokens');
  });

  test.each([false, true])(
    'a refusal stop_reason (Claude declining to go on; stream: %s) is finish_reason content_filter, billed as counted',
    async (stream) => {
      h.anthropic.script({ text: ['I cannot ', 'help'], stop: 'refusal', usage: { input_tokens: 7 } });
      const request = { model: MODEL, messages: [{ role: 'user' as const, content: 'Something harmful.' }] };
      if (stream) {
        const chunks = await collect(await h.client.chat.completions.create({ ...request, stream }));
        expect(chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join('')).toBe('I cannot help');
        expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe('content_filter');
      } else {
        const answer = await h.client.chat.completions.create(request);
        expect(answer.choices[0]).toMatchObject({
          finish_reason: 'content_filter',
          message: { content: 'I cannot help' },
        });
      }
      expect(h.recorder.entries.map((entry) => entry.usage)).toMatchObject([
        { inputTokens: 7, outputTokens: 3, exact: true },
      ]);
    },
  );

  test('a multi-turn history: consecutive turns of one role are merged, parallel tool results grouped', async () => {
    await h.client.chat.completions.create({
      model: MODEL,
      messages: [
        { role: 'user', content: 'First.' },
        { role: 'user', content: 'Second.' },
        {
          role: 'assistant',
          content: 'Checking both.',
          tool_calls: [
            {
              id: 'toolu_a',
              type: 'function',
              function: { name: 'get_weather', arguments: '{"city":"Oslo"}' },
            },
            {
              id: 'toolu_b',
              type: 'function',
              function: { name: 'get_weather', arguments: '{"city":"Bergen"}' },
            },
          ],
        },
        { role: 'tool', tool_call_id: 'toolu_a', content: 'rain' },
        { role: 'tool', tool_call_id: 'toolu_b', content: [{ type: 'text', text: 'snow' }] },
        { role: 'user', content: 'And tomorrow?' },
      ],
      tools: [weatherTool],
    });
    expect(lastSent().body.messages).toEqual([
      {
        role: 'user',
        content: [
          { type: 'text', text: 'First.' },
          { type: 'text', text: 'Second.' },
        ],
      },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'Checking both.' },
          { type: 'tool_use', id: 'toolu_a', name: 'get_weather', input: { city: 'Oslo' } },
          { type: 'tool_use', id: 'toolu_b', name: 'get_weather', input: { city: 'Bergen' } },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'toolu_a', content: 'rain' },
          { type: 'tool_result', tool_use_id: 'toolu_b', content: [{ type: 'text', text: 'snow' }] },
          { type: 'text', text: 'And tomorrow?' },
        ],
      },
    ]);
    expect(lastSent().body.tool_choice).toEqual({ type: 'auto' });
  });

  test("a user message between two tool results (an agent's screenshot) follows both in the merged turn", async () => {
    const answer = await h.client.chat.completions.create({
      model: MODEL,
      messages: [
        { role: 'user', content: 'Look twice.' },
        { role: 'assistant', content: null, tool_calls: [weatherCall('toolu_a'), weatherCall('toolu_b')] },
        { role: 'tool', tool_call_id: 'toolu_a', content: 'rain' },
        { role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://x.test/screen.png' } }] },
        { role: 'tool', tool_call_id: 'toolu_b', content: 'snow' },
      ],
      tools: [weatherTool],
    });
    expect(answer.choices[0]?.finish_reason).toBeDefined();
    expect(lastSent().body.messages.at(-1)).toEqual({
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: 'toolu_a', content: 'rain' },
        { type: 'tool_result', tool_use_id: 'toolu_b', content: 'snow' },
        { type: 'image', source: { type: 'url', url: 'https://x.test/screen.png' } },
      ],
    });
  });
});

describe('Structured Outputs (response_format json_schema) on Anthropic', () => {
  test("the schema goes as output_config.format (no beta header, no instruction); the JSON text comes back, and the openai client's parse() reads it", async () => {
    h.anthropic.script({ text: JSON.stringify(report), usage: { input_tokens: 20, output_tokens: 9 } });
    const answer = await h.client.chat.completions.parse({
      model: MODEL,
      messages: [
        { role: 'system', content: 'Report the weather.' },
        { role: 'user', content: 'Oslo?' },
      ],
      response_format: { type: 'json_schema', json_schema: weatherReport },
    });
    expect(answer.choices[0]!.message.parsed).toEqual(report);
    expect(answer.choices[0]!.message.content).toBe('{"city":"Oslo","celsius":-3}');
    expect(answer.choices[0]!.finish_reason).toBe('stop');
    const sent = lastSent();
    expect(sent.headers).not.toHaveProperty('anthropic-beta');
    expect(sent.body).toEqual({
      model: 'claude-sonnet-4-5',
      max_tokens: 64000,
      system: [{ type: 'text', text: 'Report the weather.' }],
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Oslo?' }] }],
      output_config: { format: { type: 'json_schema', schema: weatherReport.schema } },
      stream: true,
    });
    expect(h.recorder.entries[0]!.usage).toMatchObject({ inputTokens: 20, outputTokens: 9, exact: true });
  });

  test('beside tools, streamed: output_config.format still goes (Anthropic takes both), the JSON streams as content', async () => {
    h.anthropic.script({ text: ['{"city":', '"Oslo",', '"celsius":-3}'] });
    const stream = await h.client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Oslo?' }],
      response_format: { type: 'json_schema', json_schema: weatherReport },
      tools: [weatherTool],
      stream: true,
    });
    const chunks = await collect(stream);
    const text = chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join('');
    expect(JSON.parse(text)).toEqual(report);
    const body = lastSent().body;
    expect(body.output_config).toEqual({ format: { type: 'json_schema', schema: weatherReport.schema } });
    expect(body.tools).toHaveLength(1);
    expect(body).not.toHaveProperty('system');
  });

  test('a json_schema format without a schema is JSON mode: the system instruction, no output_config', async () => {
    h.anthropic.script({ text: '{"ok":true}' });
    const answer = await h.client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Say ok.' }],
      response_format: { type: 'json_schema', json_schema: { name: 'anything' } },
    });
    expect(answer.choices[0]!.message.content).toBe('{"ok":true}');
    expect(lastSent().body.system).toEqual([{ type: 'text', text: JSON_MODE_INSTRUCTION }]);
    expect(lastSent().body).not.toHaveProperty('output_config');
  });

  test('a schema Anthropic refuses (an object without additionalProperties: false) is sent as given, and its refusal is a 400 naming it; nothing billed', async () => {
    const open = { type: 'object', properties: { city: { type: 'string' } } };
    const error = await h.client.chat.completions
      .create({
        model: MODEL,
        messages: [{ role: 'user', content: 'Oslo?' }],
        response_format: { type: 'json_schema', json_schema: { name: 'city', schema: open } },
      })
      .catch((e: unknown) => e);
    expect(error).toMatchObject({
      status: 400,
      error: {
        code: 'provider_invalid_request',
        details: {
          upstreamStatus: 400,
          upstreamMessage: expect.stringContaining("'additionalProperties' must be explicitly set to false"),
        },
      },
    });
    expect(lastSent().body.output_config).toEqual({ format: { type: 'json_schema', schema: open } });
    expect(h.recorder.entries).toHaveLength(0);
    expect(h.gate.released).toBe(h.gate.admitted.length);
  });
});
