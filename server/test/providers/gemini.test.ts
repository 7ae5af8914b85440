import type OpenAI from 'openai';
import { APIError } from 'openai';
import { describe, expect, test } from 'vitest';
import { JSON_MODE_INSTRUCTION } from '../../src/providers/message-parts.js';
import { usageCost } from '../../src/services/chat-contracts.js';
import { statedCost } from '../support/chat-doubles.js';
import { collect, report, useHarness, weatherReport } from './gateway-harness.js';

const MODEL = 'google/gemini-2.5-flash';
const JPEG = '/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=';
const weatherTool = {
  type: 'function' as const,
  function: {
    name: 'get_weather',
    description: 'Current weather of a city',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string' } },
      required: ['city'],
      additionalProperties: false,
    },
  },
};

const h = useHarness();

const lastSent = () => h.gemini.log.at(-1)!;

describe('Gemini behind /v1/chat/completions', () => {
  test('a completion: generateContent with systemInstruction, usage with cache and thoughts in their buckets', async () => {
    h.gemini.script({
      thinking: 'Greeting.',
      text: 'Hello there.',
      usage: {
        promptTokenCount: 30,
        cachedContentTokenCount: 10,
        candidatesTokenCount: 4,
        thoughtsTokenCount: 6,
      },
    });
    const answer = await h.client.chat.completions.create({
      model: MODEL,
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hi' },
      ],
    });
    expect(answer).toMatchObject({
      object: 'chat.completion',
      model: MODEL,
      choices: [{ message: { role: 'assistant', content: 'Hello there.' }, finish_reason: 'stop' }],
      usage: {
        prompt_tokens: 30,
        completion_tokens: 10,
        total_tokens: 40,
        prompt_tokens_details: { cached_tokens: 10 },
        completion_tokens_details: { reasoning_tokens: 6 },
      },
    });
    const sent = lastSent();
    // Streamed even for a client that asked for one JSON body, so that a cut answer is still counted.
    expect(sent.path).toBe('/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse');
    expect(sent.headers['x-goog-api-key']).toBe('gemini-test');
    expect(sent.body).toEqual({
      contents: [{ role: 'user', parts: [{ text: 'Hi' }] }],
      systemInstruction: { parts: [{ text: 'Be brief.' }] },
      generationConfig: { maxOutputTokens: 65536 },
    });
    expect(h.recorder.entries[0]!.usage).toEqual({
      inputTokens: 20,
      cacheReadTokens: 10,
      cacheWriteTokens: 0,
      outputTokens: 4,
      reasoningTokens: 6,
      exact: true,
    });
    expect(answer.usage).toMatchObject(usageCost(statedCost(h.recorder.entries[0]!)));
  });

  test('a stream: streamGenerateContent?alt=sse, text deltas as they come, usage of the last chunk', async () => {
    h.gemini.script({
      text: ['The ', 'sky ', 'is blue.'],
      usage: { promptTokenCount: 8, candidatesTokenCount: 5, thoughtsTokenCount: 2 },
    });
    const chunks = await collect(
      await h.client.chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: 'Sky?' }],
        stream: true,
      }),
    );
    expect(lastSent().path).toBe('/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse');
    expect(new Set(chunks.map((chunk) => chunk.id)).size).toBe(1);
    expect(chunks[0]!.choices[0]!.delta.role).toBe('assistant');
    expect(chunks.filter((chunk) => chunk.choices[0]?.delta.role).length).toBe(1);
    expect(chunks.map((chunk) => chunk.choices[0]?.delta.content).filter(Boolean)).toEqual([
      'The ',
      'sky ',
      'is blue.',
    ]);
    expect(chunks.filter((chunk) => chunk.choices.length > 0).at(-1)!.choices[0]!.finish_reason).toBe('stop');
    expect(chunks.at(-1)!.usage).toMatchObject({
      prompt_tokens: 8,
      completion_tokens: 7,
      completion_tokens_details: { reasoning_tokens: 2 },
    });
    expect(h.recorder.entries[0]!.usage).toMatchObject({
      inputTokens: 8,
      outputTokens: 5,
      reasoningTokens: 2,
      exact: true,
    });
  });

  /** A tool's answer nesting deeper than the gateway forwards as JSON (64 levels). */
  const DEEP_RESULT = `{"a":${'['.repeat(1_000)}${']'.repeat(1_000)}}`;

  test('tools: functionCall gets a generated id; the result goes back as functionResponse by name', async () => {
    h.gemini.script({ toolCalls: [{ name: 'get_weather', arguments: { city: 'Paris' } }] });
    const first = await h.client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
      tools: [weatherTool],
      tool_choice: 'required',
    });
    const choice = first.choices[0]!;
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.content).toBeNull();
    const call = choice.message
      .tool_calls![0]! as OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall;
    expect(call.id).toMatch(/^call_[0-9a-f]{24}$/);
    expect(call.function).toEqual({ name: 'get_weather', arguments: '{"city":"Paris"}' });
    expect(lastSent().body).toMatchObject({
      tools: [
        {
          functionDeclarations: [
            {
              name: 'get_weather',
              description: 'Current weather of a city',
              parametersJsonSchema: weatherTool.function.parameters,
            },
          ],
        },
      ],
      toolConfig: { functionCallingConfig: { mode: 'ANY' } },
    });

    h.gemini.script({ text: 'Sunny.' });
    const second = await h.client.chat.completions.create({
      model: MODEL,
      messages: [
        { role: 'user', content: 'Weather in Paris?' },
        choice.message as OpenAI.Chat.Completions.ChatCompletionAssistantMessageParam,
        { role: 'tool', tool_call_id: call.id, content: '{"temp":21}' },
        { role: 'tool', tool_call_id: call.id, content: 'plain words' },
        { role: 'tool', tool_call_id: call.id, content: DEEP_RESULT },
      ],
      tools: [weatherTool],
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
    });
    expect(second.choices[0]!.message.content).toBe('Sunny.');
    expect(lastSent().body.contents).toEqual([
      { role: 'user', parts: [{ text: 'Weather in Paris?' }] },
      { role: 'model', parts: [{ functionCall: { name: 'get_weather', args: { city: 'Paris' } } }] },
      {
        role: 'user',
        parts: [
          { functionResponse: { name: 'get_weather', response: { temp: 21 } } },
          { functionResponse: { name: 'get_weather', response: { output: 'plain words' } } },
          // Too deep to forward as JSON: forwarded as the text it is.
          { functionResponse: { name: 'get_weather', response: { output: DEEP_RESULT } } },
        ],
      },
    ]);
    expect(lastSent().body.toolConfig).toEqual({
      functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['get_weather'] },
    });
  });

  test('tools in a stream: each call whole, with its id, name and arguments, indexed in order', async () => {
    h.gemini.script({
      toolCalls: [
        { name: 'get_weather', arguments: { city: 'Oslo' } },
        { name: 'get_weather', arguments: { city: 'Rome' } },
      ],
    });
    const chunks = await collect(
      await h.client.chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: 'Oslo and Rome?' }],
        tools: [weatherTool],
        tool_choice: 'none',
        stream: true,
      }),
    );
    expect(lastSent().body.toolConfig).toEqual({ functionCallingConfig: { mode: 'NONE' } });
    const deltas = chunks.flatMap((chunk) => chunk.choices[0]?.delta.tool_calls ?? []);
    expect(deltas).toEqual([
      {
        index: 0,
        id: expect.stringMatching(/^call_/),
        type: 'function',
        function: { name: 'get_weather', arguments: '{"city":"Oslo"}' },
      },
      {
        index: 1,
        id: expect.stringMatching(/^call_/),
        type: 'function',
        function: { name: 'get_weather', arguments: '{"city":"Rome"}' },
      },
    ]);
    expect(deltas[0]!.id).not.toBe(deltas[1]!.id);
    expect(chunks.filter((chunk) => chunk.choices.length > 0).at(-1)!.choices[0]!.finish_reason).toBe(
      'tool_calls',
    );
  });

  /** The tool calls a client gets, and its finish reason and usage, streamed or not. */
  const answered = async (stream: boolean, parallel: boolean | undefined) => {
    const answer = await h.client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Oslo and Rome?' }],
      tools: [weatherTool],
      ...(parallel !== undefined && { parallel_tool_calls: parallel }),
      stream,
    });
    if (!('choices' in answer)) {
      const chunks = await collect(answer);
      return {
        calls: chunks.flatMap((chunk) => chunk.choices[0]?.delta.tool_calls ?? []),
        finishReason: chunks.filter((chunk) => chunk.choices.length > 0).at(-1)!.choices[0]!.finish_reason,
        usage: chunks.at(-1)!.usage,
      };
    }
    const { message, finish_reason } = answer.choices[0]!;
    return { calls: message.tool_calls ?? [], finishReason: finish_reason, usage: answer.usage };
  };
  const twoCalls = {
    toolCalls: [
      { name: 'get_weather', arguments: { city: 'Oslo' } },
      { name: 'get_weather', arguments: { city: 'Rome' } },
    ],
    usage: { promptTokenCount: 12, candidatesTokenCount: 16 },
  };

  test.each([false, true])(
    'parallel_tool_calls false (stream: %s): only the first of the calls Gemini made reaches the client, all billed',
    async (stream) => {
      h.gemini.script(twoCalls);
      const { calls, finishReason, usage } = await answered(stream, false);
      expect(calls).toEqual([
        expect.objectContaining({
          id: expect.stringMatching(/^call_/),
          type: 'function',
          function: { name: 'get_weather', arguments: '{"city":"Oslo"}' },
        }),
      ]);
      expect(finishReason).toBe('tool_calls');
      expect(usage).toMatchObject({ prompt_tokens: 12, completion_tokens: 16 });
      expect(h.recorder.entries.map((entry) => entry.usage)).toMatchObject([
        { inputTokens: 12, outputTokens: 16, exact: true },
      ]);
      expect(usage).toMatchObject(usageCost(statedCost(h.recorder.entries[0]!)));
    },
  );

  test.each([
    [false, true],
    [false, undefined],
    [true, true],
    [true, undefined],
  ])(
    'parallel_tool_calls not false (stream: %s, parallel_tool_calls: %s): every call reaches the client',
    async (stream, parallel) => {
      h.gemini.script(twoCalls);
      const { calls, finishReason } = await answered(stream, parallel);
      expect(calls).toEqual(
        ['{"city":"Oslo"}', '{"city":"Rome"}'].map((args) =>
          expect.objectContaining({ function: { name: 'get_weather', arguments: args } }),
        ),
      );
      expect(finishReason).toBe('tool_calls');
    },
  );

  test('json mode beside tools is an instruction, not a response type (Gemini 2.5 refuses both together)', async () => {
    h.gemini.script({ text: '{"ok":true}' });
    await h.client.chat.completions.create({
      model: MODEL,
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Say ok as JSON.' },
      ],
      response_format: { type: 'json_object' },
      tools: [weatherTool],
    });
    const sent = lastSent().body;
    expect(sent.generationConfig).not.toHaveProperty('responseMimeType');
    expect(sent.systemInstruction).toEqual({
      parts: [{ text: 'Be brief.' }, { text: JSON_MODE_INSTRUCTION }],
    });
  });

  test('images: a data URL becomes inlineData, an http URL fileData', async () => {
    await h.client.chat.completions.create({
      model: MODEL,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'What is this?' },
            { type: 'image_url', image_url: { url: `data:image/jpeg;base64,${JPEG}` } },
            { type: 'image_url', image_url: { url: 'https://example.com/photos/dog.webp' } },
            { type: 'image_url', image_url: { url: 'https://example.com/photo?id=7' } },
          ],
        },
      ],
    });
    expect(lastSent().body.contents[0].parts).toEqual([
      { text: 'What is this?' },
      { inlineData: { mimeType: 'image/jpeg', data: JPEG } },
      { fileData: { fileUri: 'https://example.com/photos/dog.webp', mimeType: 'image/webp' } },
      // No extension to tell: JPEG, the commonest.
      { fileData: { fileUri: 'https://example.com/photo?id=7', mimeType: 'image/jpeg' } },
    ]);
  });

  test('an image URL that is not a URL is a 400 naming the part, and nothing is sent', async () => {
    const refused = await h.client.chat.completions
      .create({
        model: MODEL,
        messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://' } }] }],
      })
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(APIError);
    expect((refused as APIError).status).toBe(400);
    expect((refused as APIError).error).toMatchObject({
      code: 'validation_error',
      field: 'messages[0].content[0].image_url.url',
    });
    expect(h.gemini.log).toEqual([]);
  });

  const takenTypes = 'image/png, image/jpeg, image/webp, image/heic, or image/heif for Gemini models';
  test.each([
    ['data:image/gif;base64,AAAA', `must be a data URL of type ${takenTypes}`],
    ['data:image/svg+xml;base64,AAAA', `must be a data URL of type ${takenTypes}`],
    [
      'https://example.com/cat.gif',
      `must be an image URL of type ${takenTypes} (its extension .gif says image/gif)`,
    ],
    [
      'https://example.com/logo.SVG?v=2',
      `must be an image URL of type ${takenTypes} (its extension .SVG says image/svg+xml)`,
    ],
  ])(
    'an image of a type Gemini does not take (%s) is a 400 naming the part, before any payment',
    async (url, says) => {
      const admitted = h.gate.admitted.length;
      const refused = await h.client.chat.completions
        .create({
          model: MODEL,
          messages: [
            {
              role: 'user',
              content: [
                { type: 'text', text: 'What is this?' },
                { type: 'image_url', image_url: { url } },
              ],
            },
          ],
        })
        .catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(APIError);
      expect((refused as APIError).status).toBe(400);
      expect((refused as APIError).error).toMatchObject({
        code: 'validation_error',
        field: 'messages[0].content[1].image_url.url',
        message: `messages[0].content[1].image_url.url ${says}`,
      });
      expect(h.gemini.log).toEqual([]);
      expect(h.gate.admitted).toHaveLength(admitted);
    },
  );

  test.each([
    ['google/gemini-2.5-flash', 'none', 8192, 0],
    ['google/gemini-2.5-flash-lite', 'none', 8192, 0],
    ['google/gemini-2.5-flash', 'minimal', 8192, 1024],
    ['google/gemini-2.5-pro', 'low', 8192, 1024],
    ['google/gemini-2.5-flash', 'medium', 20_000, 8192],
    ['google/gemini-2.5-pro', 'high', 60_000, 24576],
  ] as const)(
    '%s: reasoning_effort %s under a limit of %d tokens is thinkingBudget %d, as Google maps it',
    async (model, effort, limit, budget) => {
      await h.client.chat.completions.create({
        model,
        messages: [{ role: 'user', content: 'Hi' }],
        reasoning_effort: effort,
        max_completion_tokens: limit,
      });
      expect(lastSent().body.generationConfig).toEqual({
        maxOutputTokens: limit,
        thinkingConfig: { thinkingBudget: budget },
      });
    },
  );

  test.each([
    ['medium', 12_000, 12_000, 6000],
    ['high', 10_000, 10_000, 5000],
    ['low', 1500, 1500, 750],
  ] as const)(
    'a thinking budget (%s) that would leave the answer no room under the limit gets half of it: max_completion_tokens %s, maxOutputTokens %d, thinkingBudget %d',
    async (effort, asked, limit, budget) => {
      await h.client.chat.completions.create({
        model: 'google/gemini-2.5-flash',
        messages: [{ role: 'user', content: 'Hi' }],
        reasoning_effort: effort,
        ...(asked !== undefined && { max_completion_tokens: asked }),
      });
      expect(lastSent().body.generationConfig).toEqual({
        maxOutputTokens: limit,
        thinkingConfig: { thinkingBudget: budget },
      });
    },
  );

  test.each([
    [
      'google/gemini-2.5-pro',
      'none',
      'cannot be none for google/gemini-2.5-pro: the model cannot turn thinking off',
    ],
    [
      'google/gemini-3-pro-preview',
      'none',
      'cannot be none for google/gemini-3-pro-preview: the model cannot turn thinking off',
    ],
    ['google/gemini-2.5-flash', 'xhigh', 'must be none, minimal, low, medium or high for Gemini models'],
  ] as const)(
    '%s: reasoning_effort %s is a 400 naming it, before any payment; nothing is sent',
    async (model, effort, message) => {
      const admitted = h.gate.admitted.length;
      const refused = await h.client.chat.completions
        .create({ model, messages: [{ role: 'user', content: 'Hi' }], reasoning_effort: effort })
        .catch((error: unknown) => error);
      expect((refused as APIError).status).toBe(400);
      expect((refused as APIError).error).toMatchObject({
        code: 'validation_error',
        field: 'reasoning_effort',
        message: `reasoning_effort ${message}`,
      });
      expect(h.gemini.log).toEqual([]);
      expect(h.gate.admitted).toHaveLength(admitted);
    },
  );

  test('json mode, stop, sampling and seed go to generationConfig; penalties are dropped (Gemini 2.5 refuses them)', async () => {
    h.gemini.script({ text: '{"ok":true}' });
    const answer = await h.client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Say ok as JSON.' }],
      response_format: { type: 'json_object' },
      stop: 'END',
      temperature: 1.5,
      top_p: 0.9,
      // @ts-expect-error top_k is not in the OpenAI types, but the gateway accepts it
      top_k: 40,
      presence_penalty: 0.5,
      frequency_penalty: -0.5,
      seed: 7,
      max_completion_tokens: 100,
    });
    expect(answer.choices[0]!.message.content).toBe('{"ok":true}');
    expect(lastSent().body.generationConfig).toEqual({
      maxOutputTokens: 100,
      temperature: 1.5,
      topP: 0.9,
      topK: 40,
      stopSequences: ['END'],
      responseMimeType: 'application/json',
      seed: 7,
    });
  });

  test("seed and top_k at the ends of Gemini's int32 range are sent", async () => {
    for (const [seed, topK] of [
      [-(2 ** 31), 1],
      [2 ** 31 - 1, 2 ** 31 - 1],
    ]) {
      await h.client.chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: 'Hi' }],
        seed,
        // @ts-expect-error top_k is not in the OpenAI types, but the gateway accepts it
        top_k: topK,
      });
      expect(lastSent().body.generationConfig).toMatchObject({ seed, topK });
    }
  });

  test.each([
    ['seed', 2 ** 31],
    ['seed', -(2 ** 31) - 1],
    ['top_k', 2 ** 31],
  ])("%s %d, beyond Gemini's int32, is a 400 naming it, and nothing is sent", async (field, value) => {
    const refused = await h.client.chat.completions
      .create({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], [field]: value })
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(APIError);
    expect((refused as APIError).status).toBe(400);
    expect((refused as APIError).error).toMatchObject({
      code: 'validation_error',
      field,
      message: `${field} must be between -2147483648 and 2147483647 for Gemini models`,
    });
    expect(h.gemini.log).toEqual([]);
    expect(h.recorder.entries).toEqual([]);
  });

  test('MAX_TOKENS is finish_reason length; SAFETY is content_filter', async () => {
    h.gemini.script({ text: 'Once upon', stop: 'MAX_TOKENS' }, { stop: 'SAFETY' });
    const cut = await h.client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'A story.' }],
      max_tokens: 2,
    });
    expect(cut.choices[0]!.finish_reason).toBe('length');
    expect(lastSent().body.generationConfig.maxOutputTokens).toBe(2);
    const filtered = await h.client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Something unsafe.' }],
    });
    expect(filtered.choices[0]).toMatchObject({ finish_reason: 'content_filter', message: { content: '' } });
  });

  const withheld = [
    'SAFETY',
    'RECITATION',
    'LANGUAGE',
    'OTHER',
    'BLOCKLIST',
    'PROHIBITED_CONTENT',
    'SPII',
    'IMAGE_SAFETY',
    'IMAGE_PROHIBITED_CONTENT',
    'IMAGE_RECITATION',
    'IMAGE_OTHER',
    'NO_IMAGE',
    'FINISH_REASON_UNSPECIFIED',
  ] as const;
  test.each(withheld)(
    'an answer Gemini ends with %s is content_filter, streamed or not, never a clean stop; billed as counted',
    async (stop) => {
      h.gemini.script(
        { text: ['The start ', 'of it'], stop, usage: { promptTokenCount: 9 } },
        { text: ['The start ', 'of it'], stop, usage: { promptTokenCount: 9 } },
      );
      const whole = await h.client.chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: 'Go.' }],
      });
      expect(whole.choices[0]).toMatchObject({
        finish_reason: 'content_filter',
        message: { content: 'The start of it' },
      });
      const chunks = await collect(
        await h.client.chat.completions.create({
          model: MODEL,
          messages: [{ role: 'user', content: 'Go.' }],
          stream: true,
        }),
      );
      expect(chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join('')).toBe('The start of it');
      expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe('content_filter');
      expect(h.recorder.entries.map((entry) => entry.usage)).toMatchObject([
        { inputTokens: 9, outputTokens: 4, exact: true },
        { inputTokens: 9, outputTokens: 4, exact: true },
      ]);
    },
  );

  test.each([false, true])(
    'a prompt Gemini blocks (promptFeedback.blockReason, no candidates; stream: %s) is an empty content_filter answer',
    async (stream) => {
      h.gemini.script({ blockReason: 'PROHIBITED_CONTENT' });
      const request = {
        model: MODEL,
        messages: [{ role: 'user' as const, content: 'Something prohibited.' }],
      };
      if (stream) {
        const chunks = await collect(await h.client.chat.completions.create({ ...request, stream }));
        expect(chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join('')).toBe('');
        expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe('content_filter');
      } else {
        const answer = await h.client.chat.completions.create(request);
        expect(answer.choices[0]).toMatchObject({
          finish_reason: 'content_filter',
          message: { content: '' },
        });
      }
      // Gemini counts the refused prompt; the gateway bills what it counted.
      expect(h.recorder.entries.map((entry) => entry.usage)).toMatchObject([
        { inputTokens: 2, outputTokens: 0, exact: true },
      ]);
    },
  );

  test.each([false, true])(
    'MALFORMED_FUNCTION_CALL (stream: %s) is a 502 a client retries, billed as Gemini counted, not a stop',
    async (stream) => {
      h.gemini.script({
        stop: 'MALFORMED_FUNCTION_CALL',
        usage: { promptTokenCount: 30, candidatesTokenCount: 0 },
      });
      const refused = await h.client.chat.completions
        .create({ model: MODEL, messages: [{ role: 'user', content: 'Call the tool.' }], stream })
        .catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(APIError);
      expect((refused as APIError).status).toBe(502);
      expect((refused as APIError).headers?.get('x-should-retry')).toBeNull();
      expect((refused as APIError).error).toMatchObject({
        code: 'provider_error',
        message:
          'google failed: the answer ended with MALFORMED_FUNCTION_CALL: Gemini could not make its function call',
        details: { billed: { prompt_tokens: 30, completion_tokens: 0 } },
      });
      expect(h.recorder.entries.map((entry) => entry.usage)).toMatchObject([
        { inputTokens: 30, exact: true },
      ]);
    },
  );

  test('a multi-turn history: roles user/model, consecutive turns merged, assistant text kept', async () => {
    await h.client.chat.completions.create({
      model: MODEL,
      messages: [
        { role: 'system', content: 'Rule one.' },
        { role: 'system', content: [{ type: 'text', text: 'Rule two.' }] },
        { role: 'user', content: 'Hello.' },
        { role: 'assistant', content: 'Hi! How can I help?' },
        { role: 'user', content: 'Tell me a joke.' },
        { role: 'user', content: 'A short one.' },
      ],
    });
    expect(lastSent().body.systemInstruction).toEqual({
      parts: [{ text: 'Rule one.' }, { text: 'Rule two.' }],
    });
    expect(lastSent().body.contents).toEqual([
      { role: 'user', parts: [{ text: 'Hello.' }] },
      { role: 'model', parts: [{ text: 'Hi! How can I help?' }] },
      { role: 'user', parts: [{ text: 'Tell me a joke.' }, { text: 'A short one.' }] },
    ]);
  });
});

describe('Gemini 3 thought signatures', () => {
  const GEMINI_3 = 'google/gemini-3-pro-preview';
  type ToolCall = OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall & {
    extra_content?: { google?: { thought_signature?: string } };
  };
  const signatureOf = (call: ToolCall | undefined) => call?.extra_content?.google?.thought_signature;

  test("a call's signature goes out in extra_content and back as the part's thoughtSignature: the next step is accepted", async () => {
    h.gemini.script({
      toolCalls: [
        { name: 'get_weather', arguments: { city: 'Oslo' } },
        { name: 'get_weather', arguments: { city: 'Rome' } },
      ],
    });
    const question = { role: 'user' as const, content: 'Oslo and Rome?' };
    const first = await h.client.chat.completions.create({
      model: GEMINI_3,
      messages: [question],
      tools: [weatherTool],
    });
    const message = first.choices[0]!.message;
    const [oslo, rome] = message.tool_calls as ToolCall[];
    // Gemini signs the first call of a step; parallel calls after it carry none.
    expect(signatureOf(oslo)).toEqual(expect.any(String));
    expect(rome?.extra_content).toBeUndefined();

    h.gemini.script({ text: 'Cold in Oslo, warm in Rome.' });
    const second = await h.client.chat.completions.create({
      model: GEMINI_3,
      messages: [
        question,
        message as OpenAI.Chat.Completions.ChatCompletionAssistantMessageParam,
        { role: 'tool', tool_call_id: oslo!.id, content: '{"temp":-3}' },
        { role: 'tool', tool_call_id: rome!.id, content: '{"temp":24}' },
      ],
      tools: [weatherTool],
    });
    expect(second.choices[0]!.message.content).toBe('Cold in Oslo, warm in Rome.');
    expect(lastSent().body.contents[1]).toEqual({
      role: 'model',
      parts: [
        {
          functionCall: { name: 'get_weather', args: { city: 'Oslo' } },
          thoughtSignature: signatureOf(oslo),
        },
        { functionCall: { name: 'get_weather', args: { city: 'Rome' } } },
      ],
    });
  });

  test('in a stream the signature comes with the call; steps of one turn each keep their own', async () => {
    const question = { role: 'user' as const, content: 'Weather in Oslo, then in Rome?' };
    /** One streamed step: its tool call, and the assistant message a client builds from the deltas. */
    const streamedStep = async (messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[]) => {
      const chunks = await collect(
        await h.client.chat.completions.create({
          model: GEMINI_3,
          messages,
          tools: [weatherTool],
          stream: true,
        }),
      );
      const [delta] = chunks.flatMap((chunk) => chunk.choices[0]?.delta.tool_calls ?? []) as ToolCall[];
      const call: ToolCall = {
        id: delta!.id,
        type: 'function',
        function: delta!.function,
        extra_content: delta!.extra_content,
      };
      return { call, message: { role: 'assistant' as const, content: null, tool_calls: [call] } };
    };
    h.gemini.script({ toolCalls: [{ name: 'get_weather', arguments: { city: 'Oslo' } }] });
    const oslo = await streamedStep([question]);
    h.gemini.script({ toolCalls: [{ name: 'get_weather', arguments: { city: 'Rome' } }] });
    const history = [
      question,
      oslo.message,
      { role: 'tool' as const, tool_call_id: oslo.call.id, content: '-3' },
    ];
    const rome = await streamedStep(history);
    expect(signatureOf(oslo.call)).toEqual(expect.any(String));
    expect(signatureOf(rome.call)).toEqual(expect.any(String));
    expect(signatureOf(rome.call)).not.toBe(signatureOf(oslo.call));

    h.gemini.script({ text: 'Cold, then warm.' });
    const answer = await h.client.chat.completions.create({
      model: GEMINI_3,
      messages: [...history, rome.message, { role: 'tool', tool_call_id: rome.call.id, content: '24' }],
      tools: [weatherTool],
    });
    expect(answer.choices[0]!.message.content).toBe('Cold, then warm.');
    const signatures = lastSent()
      .body.contents.flatMap((content: { parts: Array<{ thoughtSignature?: string }> }) => content.parts)
      .map((part: { thoughtSignature?: string }) => part.thoughtSignature)
      .filter(Boolean);
    expect(signatures).toEqual([signatureOf(oslo.call), signatureOf(rome.call)]);
  });

  test('a history without the signature is refused by Gemini 3: a 400 naming the upstream 400 and its reason', async () => {
    const error = await h.client.chat.completions
      .create({
        model: GEMINI_3,
        messages: [
          { role: 'user', content: 'Weather in Oslo?' },
          {
            role: 'assistant',
            content: null,
            tool_calls: [
              {
                id: 'call_1',
                type: 'function',
                function: { name: 'get_weather', arguments: '{"city":"Oslo"}' },
              },
            ],
          },
          { role: 'tool', tool_call_id: 'call_1', content: '-3' },
        ],
        tools: [weatherTool],
      })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(APIError);
    expect((error as APIError).status).toBe(400);
    expect((error as APIError).error).toMatchObject({
      code: 'provider_invalid_request',
      details: {
        upstreamStatus: 400,
        upstreamMessage: expect.stringContaining('missing a thought_signature'),
      },
    });
  });
});

describe('Structured Outputs (response_format json_schema) on Gemini', () => {
  test("the schema goes as responseJsonSchema with the JSON response type; the openai client's parse() reads the answer", async () => {
    h.gemini.script({ text: JSON.stringify(report) });
    const answer = await h.client.chat.completions.parse({
      model: MODEL,
      messages: [
        { role: 'system', content: 'Report the weather.' },
        { role: 'user', content: 'Oslo?' },
      ],
      response_format: { type: 'json_schema', json_schema: weatherReport },
      max_tokens: 100,
    });
    expect(answer.choices[0]!.message.parsed).toEqual(report);
    expect(answer.choices[0]!.finish_reason).toBe('stop');
    const sent = lastSent().body;
    expect(sent.generationConfig).toEqual({
      maxOutputTokens: 100,
      responseMimeType: 'application/json',
      responseJsonSchema: weatherReport.schema,
    });
    expect(sent.systemInstruction).toEqual({ parts: [{ text: 'Report the weather.' }] });
  });

  test('beside tools (Gemini 2.5 refuses its JSON response type with function calling): a system instruction carrying the schema', async () => {
    h.gemini.script({ text: ['{"city":"Oslo",', '"celsius":-3}'] });
    const stream = await h.client.chat.completions.create({
      model: MODEL,
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Oslo?' },
      ],
      response_format: { type: 'json_schema', json_schema: weatherReport },
      tools: [weatherTool],
      stream: true,
    });
    const chunks = await collect(stream);
    expect(JSON.parse(chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join(''))).toEqual(report);
    const sent = lastSent().body;
    expect(sent.generationConfig).not.toHaveProperty('responseMimeType');
    expect(sent.generationConfig).not.toHaveProperty('responseJsonSchema');
    expect(sent.systemInstruction.parts).toHaveLength(2);
    expect(sent.systemInstruction.parts[0]).toEqual({ text: 'Be brief.' });
    const instruction: string = sent.systemInstruction.parts[1].text;
    expect(instruction.startsWith(JSON_MODE_INSTRUCTION)).toBe(true);
    expect(instruction).toContain(JSON.stringify(weatherReport.schema));
  });

  test('a json_schema format without a schema is JSON mode: the JSON response type alone', async () => {
    h.gemini.script({ text: '{"ok":true}' });
    const answer = await h.client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Say ok.' }],
      response_format: { type: 'json_schema', json_schema: { name: 'anything', strict: null } },
    });
    expect(answer.choices[0]!.message.content).toBe('{"ok":true}');
    const config = lastSent().body.generationConfig;
    expect(config).toMatchObject({ responseMimeType: 'application/json' });
    expect(config).not.toHaveProperty('responseJsonSchema');
    expect(lastSent().body).not.toHaveProperty('systemInstruction');
  });
});
