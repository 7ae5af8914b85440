import { describe, expect, test } from 'vitest';
import {
  AnthropicStreamDecoder,
  anthropicFinishReason,
  anthropicRequestBody,
} from '../../src/providers/anthropic/anthropic.js';
import {
  GeminiStreamDecoder,
  geminiContents,
  geminiFinishReason,
  geminiUsage,
} from '../../src/providers/gemini/gemini.js';
import { imageSource, mediaTypeOfUrl, toolArguments } from '../../src/providers/message-parts.js';
import { openAIUsage, upstreamRequestBody } from '../../src/providers/openai-compatible/openai-compatible.js';
import type { ChatMessage, ChatRequest } from '../../src/providers/openai-types.js';
import { serverSentEvents } from '../../src/providers/sse.js';
import { ProviderError, UntranslatableRequestError } from '../../src/providers/types.js';
import { errorMessage } from '../../src/providers/upstream.js';
import { toOpenAIUsage } from '../../src/providers/usage.js';

const event = (data: unknown) => ({ data: JSON.stringify(data) });

async function* bytes(...pieces: Array<string | Uint8Array>) {
  for (const piece of pieces) yield typeof piece === 'string' ? new TextEncoder().encode(piece) : piece;
}

async function eventsOf(source: AsyncIterable<Uint8Array>) {
  const events = [];
  for await (const batch of serverSentEvents(source))
    for (const message of batch) events.push({ event: message.event, data: message.data });
  return events;
}

describe('image parts', () => {
  const images = { provider: 'Test', mediaTypes: ['image/png', 'image/jpeg', 'image/svg+xml'] };

  test('a base64 data URL is inline data; an http(s) URL stays a URL', () => {
    expect(imageSource('data:image/png;base64,AAAA', 'f', images)).toEqual({
      kind: 'inline',
      mediaType: 'image/png',
      data: 'AAAA',
    });
    expect(imageSource('https://x.test/a.png', 'f', images)).toEqual({
      kind: 'url',
      url: 'https://x.test/a.png',
    });
  });

  test('a data URL without ;base64 is percent-decoded and re-encoded', () => {
    const source = imageSource('data:image/svg+xml,%3Csvg%2F%3E', 'f', images);
    expect(source).toEqual({
      kind: 'inline',
      mediaType: 'image/svg+xml',
      data: Buffer.from('<svg/>').toString('base64'),
    });
  });

  test('a data URL without ;base64 stands for its bytes: %XX is one byte, a stray % is itself', () => {
    const png = imageSource('data:image/png,%89PNG%0D%0A%1A%0A', 'f', images);
    expect(png).toMatchObject({ kind: 'inline', mediaType: 'image/png' });
    expect([...Buffer.from((png as { data: string }).data, 'base64')]).toEqual([
      0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a,
    ]);
    const stray = imageSource('data:image/svg+xml,100%25 %zz é', 'f', images) as { data: string };
    expect(Buffer.from(stray.data, 'base64').toString('utf8')).toBe('100% %zz é');
  });

  test('the media type is lowercase, and image/jpg is image/jpeg', () => {
    expect(imageSource('data:IMAGE/PNG;base64,AAAA', 'f', images)).toMatchObject({ mediaType: 'image/png' });
    expect(imageSource('data:image/jpg;base64,AAAA', 'f', images)).toMatchObject({ mediaType: 'image/jpeg' });
    expect(imageSource('data:image/png;BASE64,AAAA', 'f', images)).toMatchObject({ data: 'AAAA' });
  });

  test('an image URL’s media type comes from its extension, JPEG when it has none; one not taken is refused', () => {
    const taken = { provider: 'Test', mediaTypes: ['image/png', 'image/jpeg', 'image/heic'] };
    expect(mediaTypeOfUrl('https://x.test/a/b.PNG?size=2', 'f', taken)).toBe('image/png');
    expect(mediaTypeOfUrl('https://x.test/photo.heic', 'f', taken)).toBe('image/heic');
    expect(mediaTypeOfUrl('https://x.test/image?id=7', 'f', taken)).toBe('image/jpeg');
    expect(() => mediaTypeOfUrl('https://x.test/logo.SVG', 'f', taken)).toThrow(
      expect.objectContaining({ field: 'f' }),
    );
  });

  test('anything else is refused, naming the field', () => {
    for (const url of [
      'ftp://x.test/a.png',
      'data:text/plain;base64,AAAA',
      'data:image/gif;base64,AAAA',
      'data:;base64,AAAA',
      'cat.png',
      'https://',
      'http://exa mple.com/a.png',
    ]) {
      const error = (() => {
        try {
          imageSource(url, 'messages[0].content[1].image_url.url', images);
        } catch (e) {
          return e;
        }
      })();
      expect(error).toBeInstanceOf(UntranslatableRequestError);
      expect((error as UntranslatableRequestError).field).toBe('messages[0].content[1].image_url.url');
    }
  });
});

describe('tool call arguments', () => {
  test('an empty string is an empty object; a JSON object is parsed', () => {
    expect(toolArguments('', 'f')).toEqual({});
    expect(toolArguments('{"a":[1]}', 'f')).toEqual({ a: [1] });
  });

  test('anything but a JSON object is a 400 on that field', () => {
    for (const text of ['[1]', '"x"', '{oops', 'null'])
      expect(() => toolArguments(text, 'messages[1].tool_calls[0].function.arguments')).toThrow(
        UntranslatableRequestError,
      );
  });
});

describe('upstream error bodies', () => {
  test('the provider’s own message is kept, whichever family wrote it', () => {
    expect(
      errorMessage('{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}', 400),
    ).toBe('bad');
    expect(errorMessage('{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED"}}', 429)).toBe(
      'quota',
    );
    expect(errorMessage('{"error":{"message":"no such model","type":"invalid_request_error"}}', 404)).toBe(
      'no such model',
    );
    expect(errorMessage('{"error":"Model not found"}', 404)).toBe('Model not found');
    expect(errorMessage('upstream connect error', 503)).toBe('upstream connect error');
    expect(errorMessage('', 502)).toBe('HTTP 502');
    expect(errorMessage('x'.repeat(5000), 500)).toHaveLength(1001);
  });
});

describe('server-sent events', () => {
  test('events split anywhere (mid-line, mid-character, CRLF) come out whole, the last without its blank line', async () => {
    const euro = new TextEncoder().encode('data: {"t":"€"}\r\n\r\n');
    const source = bytes(
      'event: message_start\nda',
      'ta: {"a":1}\n',
      '\n',
      euro.slice(0, 12),
      euro.slice(12),
      ': a comment\n\n',
      'data: [DONE]',
    );
    expect(await eventsOf(source)).toEqual([
      { event: 'message_start', data: '{"a":1}' },
      { event: undefined, data: '{"t":"€"}' },
      { event: undefined, data: '[DONE]' },
    ]);
  });
});

describe('Anthropic', () => {
  test('the stream decoder: text and tool deltas, OpenAI tool indexes, cumulative usage, one finish', () => {
    const decoder = new AnthropicStreamDecoder();
    const parts = [
      {
        type: 'message_start',
        message: { usage: { input_tokens: 10, cache_read_input_tokens: 2, output_tokens: 1 } },
      },
      { type: 'content_block_start', index: 0, content_block: { type: 'thinking', thinking: '' } },
      { type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: 'hmm' } },
      { type: 'content_block_stop', index: 0 },
      { type: 'content_block_start', index: 1, content_block: { type: 'text', text: '' } },
      { type: 'ping' },
      { type: 'content_block_delta', index: 1, delta: { type: 'text_delta', text: 'Hi' } },
      {
        type: 'content_block_start',
        index: 2,
        content_block: { type: 'tool_use', id: 'toolu_9', name: 'f', input: {} },
      },
      { type: 'content_block_delta', index: 2, delta: { type: 'input_json_delta', partial_json: '{"a":' } },
      { type: 'content_block_delta', index: 2, delta: { type: 'input_json_delta', partial_json: '1}' } },
      { type: 'message_delta', delta: { stop_reason: 'tool_use' }, usage: { output_tokens: 30 } },
      { type: 'message_delta', delta: { stop_reason: 'tool_use' }, usage: { output_tokens: 31 } },
      { type: 'a_future_event' },
    ].flatMap((data) => decoder.decode(event(data)));
    expect(parts).toEqual([
      // Thinking is reasoning, not content (OpenRouter's reasoning and reasoning_details).
      {
        type: 'delta',
        reasoning: 'hmm',
        reasoningDetails: [{ type: 'reasoning.text', text: 'hmm', index: 0, format: 'anthropic-claude-v1' }],
      },
      { type: 'delta', content: 'Hi' },
      {
        type: 'delta',
        toolCalls: [{ index: 0, id: 'toolu_9', type: 'function', function: { name: 'f', arguments: '' } }],
      },
      { type: 'delta', toolCalls: [{ index: 0, function: { arguments: '{"a":' } }] },
      { type: 'delta', toolCalls: [{ index: 0, function: { arguments: '1}' } }] },
      { type: 'finish', finishReason: 'tool_calls' },
    ]);
    expect(decoder.usage()).toEqual({
      inputTokens: 10,
      cacheReadTokens: 2,
      cacheWriteTokens: 0,
      // The thinking text, estimated at 4 bytes a token, is reasoning.
      outputTokens: 30,
      reasoningTokens: 1,
      exact: false,
    });
    expect(() => decoder.end()).toThrow(/before message_stop/);
    decoder.decode(event({ type: 'message_stop' }));
    expect(decoder.end()).toEqual([]);
    expect(decoder.usage().exact).toBe(true);
  });

  test('a streamed tool call without input ends with arguments {}, as the whole answer has them', () => {
    const decoder = new AnthropicStreamDecoder();
    const parts = [
      {
        type: 'content_block_start',
        index: 0,
        content_block: { type: 'tool_use', id: 'toolu_1', name: 'now', input: {} },
      },
      { type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: '' } },
      { type: 'content_block_stop', index: 0 },
      {
        type: 'content_block_start',
        index: 1,
        content_block: { type: 'tool_use', id: 'toolu_2', name: 'f', input: {} },
      },
      { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '{}' } },
      { type: 'content_block_stop', index: 1 },
    ].flatMap((data) => decoder.decode(event(data)));
    const argumentsOf = (index: number) =>
      parts
        .flatMap((part) => (part.type === 'delta' ? (part.toolCalls ?? []) : []))
        .filter((call) => call.index === index)
        .map((call) => call.function?.arguments ?? '')
        .join('');
    expect(argumentsOf(0)).toBe('{}');
    expect(argumentsOf(1)).toBe('{}');
  });

  test('an error event is a ProviderError with the status of its type', () => {
    const decoder = new AnthropicStreamDecoder();
    let error: unknown;
    try {
      decoder.decode(event({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }));
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ProviderError);
    expect(error).toMatchObject({ message: 'Overloaded', upstreamStatus: 529 });
  });

  test('stop reasons', () => {
    expect(
      [
        'end_turn',
        'stop_sequence',
        'pause_turn',
        'max_tokens',
        'model_context_window_exceeded',
        'tool_use',
        'refusal',
        null,
      ].map(anthropicFinishReason),
    ).toEqual(['stop', 'stop', 'stop', 'length', 'length', 'tool_calls', 'content_filter', 'stop']);
  });

  test('top_p alone is sent; tool_choice none keeps the tools; no tools means no tool_choice', () => {
    const model = {
      id: 'anthropic/x',
      provider: 'anthropic',
      providerModel: 'x',
      name: 'X',
      contextLength: 1000,
      maxOutputTokens: 100,
      maxImageTokens: 100,
      pricing: { input: '1', output: '1' },
      sampling: { parameters: ['top_p' as const], notTogether: [] },
    };
    const tool = { type: 'function' as const, function: { name: 'f' } };
    expect(
      anthropicRequestBody(
        { messages: [{ role: 'user', content: 'q' }], top_p: 0.5, tools: [tool], tool_choice: 'none' },
        model,
      )({ outputTokens: 50 }),
    ).toEqual({
      model: 'x',
      max_tokens: 50,
      messages: [{ role: 'user', content: [{ type: 'text', text: 'q' }] }],
      top_p: 0.5,
      tools: [{ name: 'f', input_schema: { type: 'object', properties: {} } }],
      tool_choice: { type: 'none' },
      stream: true,
    });
    expect(
      anthropicRequestBody(
        { messages: [{ role: 'user', content: 'q' }], tool_choice: 'auto' },
        model,
      )({
        outputTokens: 50,
      }),
    ).not.toHaveProperty('tool_choice');
  });
});

describe('Gemini', () => {
  test('usage: cached tokens leave the prompt count, tool-use prompt tokens join it, thoughts apart', () => {
    expect(
      geminiUsage(
        {
          promptTokenCount: 100,
          cachedContentTokenCount: 60,
          toolUsePromptTokenCount: 7,
          candidatesTokenCount: 20,
          thoughtsTokenCount: 15,
          totalTokenCount: 142,
        },
        true,
      ),
    ).toEqual({
      inputTokens: 47,
      cacheReadTokens: 60,
      cacheWriteTokens: 0,
      outputTokens: 20,
      reasoningTokens: 15,
      exact: true,
    });
  });

  test('finish reasons: STOP with calls is tool_calls, any reason but STOP and MAX_TOKENS is content_filter', () => {
    expect(geminiFinishReason('STOP', false)).toBe('stop');
    expect(geminiFinishReason('STOP', true)).toBe('tool_calls');
    expect(geminiFinishReason('MAX_TOKENS', true)).toBe('length');
    for (const reason of [
      'SAFETY',
      'RECITATION',
      'BLOCKLIST',
      'PROHIBITED_CONTENT',
      'SPII',
      'OTHER',
      'A_NEW_ONE',
    ])
      expect(geminiFinishReason(reason, false)).toBe('content_filter');
  });

  test('the stream decoder skips thoughts, keeps the last usage, finishes when the stream ends', () => {
    const decoder = new GeminiStreamDecoder();
    const parts = [
      {
        candidates: [{ content: { parts: [{ text: 'plan', thought: true }] } }],
        usageMetadata: { promptTokenCount: 5 },
      },
      {
        candidates: [{ content: { parts: [{ text: 'Hi' }] } }],
        usageMetadata: { promptTokenCount: 5, candidatesTokenCount: 1 },
      },
      {
        candidates: [{ content: { parts: [{ text: '!' }] }, finishReason: 'STOP' }],
        usageMetadata: { promptTokenCount: 5, candidatesTokenCount: 2, thoughtsTokenCount: 4 },
      },
    ].flatMap((data) => decoder.decode(event(data)));
    expect(parts).toEqual([
      { type: 'delta', content: 'Hi' },
      { type: 'delta', content: '!' },
    ]);
    expect(decoder.usage()).toMatchObject({
      inputTokens: 5,
      outputTokens: 2,
      reasoningTokens: 4,
      exact: false,
    });
    expect(decoder.end()).toEqual([{ type: 'finish', finishReason: 'stop' }]);
    expect(decoder.usage().exact).toBe(true);
  });

  test('a blocked prompt finishes as content_filter; a stream without a finishReason is an error', () => {
    const blocked = new GeminiStreamDecoder();
    blocked.decode(
      event({
        promptFeedback: { blockReason: 'PROHIBITED_CONTENT' },
        usageMetadata: { promptTokenCount: 3 },
      }),
    );
    expect(blocked.end()).toEqual([{ type: 'finish', finishReason: 'content_filter' }]);
    const cut = new GeminiStreamDecoder();
    cut.decode(event({ candidates: [{ content: { parts: [{ text: 'a' }] } }] }));
    expect(() => cut.end()).toThrow(ProviderError);
  });

  /** Two function calls in separate events, with text before, between and after them. */
  const callsApart = [
    { candidates: [{ content: { parts: [{ text: 'Checking.' }] } }] },
    {
      candidates: [
        { content: { parts: [{ functionCall: { name: 'get_weather', args: { city: 'Oslo' } } }] } },
      ],
    },
    { candidates: [{ content: { parts: [{ text: ' And' }] } }] },
    {
      candidates: [
        { content: { parts: [{ functionCall: { name: 'get_weather', args: { city: 'Rome' } } }] } },
      ],
    },
    { candidates: [{ content: { parts: [{ text: ' done.' }] }, finishReason: 'STOP' }] },
  ];
  const weatherCall = (index: number, city: string) => ({
    type: 'delta',
    toolCalls: [
      {
        index,
        id: expect.stringMatching(/^call_/),
        type: 'function',
        function: { name: 'get_weather', arguments: JSON.stringify({ city }) },
      },
    ],
  });

  test.each([
    [true, [weatherCall(0, 'Oslo')]],
    [false, [weatherCall(0, 'Oslo'), weatherCall(1, 'Rome')]],
  ])(
    'calls in separate stream events (one call only: %s): the calls relayed, every text',
    (oneCallOnly, calls) => {
      const decoder = new GeminiStreamDecoder(oneCallOnly);
      const parts = callsApart.flatMap((data) => decoder.decode(event(data)));
      expect(parts).toEqual([
        { type: 'delta', content: 'Checking.' },
        calls[0],
        { type: 'delta', content: ' And' },
        ...calls.slice(1),
        { type: 'delta', content: ' done.' },
      ]);
      expect(decoder.end()).toEqual([{ type: 'finish', finishReason: 'tool_calls' }]);
    },
  );

  test('an error chunk is a ProviderError with its code', () => {
    expect(() =>
      new GeminiStreamDecoder().decode(
        event({ error: { code: 503, message: 'overloaded', status: 'UNAVAILABLE' } }),
      ),
    ).toThrow(expect.objectContaining({ upstreamStatus: 503, message: 'overloaded' }));
  });

  test('a tool result whose id names no earlier call cannot be sent (Gemini matches results by name)', () => {
    expect(() =>
      geminiContents([
        { role: 'user', content: 'q' },
        { role: 'tool', tool_call_id: 'call_nowhere', content: 'x' },
      ]),
    ).toThrow(UntranslatableRequestError);
  });
});

describe('the conversation as each provider takes it', () => {
  const claude = { providerModel: 'claude' } as Parameters<typeof anthropicRequestBody>[1];
  const anthropicOf = (messages: ChatMessage[], extra: Partial<ChatRequest> = {}) =>
    anthropicRequestBody({ messages, ...extra }, claude)({ outputTokens: 64 }) as Record<string, unknown>;

  test('a developer message is a system instruction (sent as system to an OpenAI-compatible upstream)', () => {
    const messages: ChatMessage[] = [
      { role: 'developer', content: 'Be terse.' },
      { role: 'user', content: 'hi' },
    ];
    expect(anthropicOf(messages)).toMatchObject({
      system: [{ type: 'text', text: 'Be terse.' }],
      messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }],
    });
    expect(geminiContents(messages)).toEqual({
      systemInstruction: { parts: [{ text: 'Be terse.' }] },
      contents: [{ role: 'user', parts: [{ text: 'hi' }] }],
    });
    const upstream = upstreamRequestBody({ messages }, { providerModel: 'm' })({ outputTokens: 8 });
    expect(upstream.messages).toEqual([
      { role: 'system', content: 'Be terse.' },
      { role: 'user', content: 'hi' },
    ]);
  });

  test('empty texts are left out, and messages left empty by them (both providers refuse them)', () => {
    const messages: ChatMessage[] = [
      { role: 'user', content: '' },
      { role: 'assistant', content: [{ type: 'text', text: '' }] },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'hi' },
          { type: 'text', text: '' },
        ],
      },
      {
        role: 'assistant',
        content: '',
        tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{}' } }],
      },
      { role: 'tool', tool_call_id: 'call_1', content: 'done' },
    ];
    expect(anthropicOf(messages).messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'hi' }] },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'call_1', name: 'f', input: {} }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'call_1', content: 'done' }] },
    ]);
    expect(geminiContents(messages).contents).toEqual([
      { role: 'user', parts: [{ text: 'hi' }] },
      { role: 'model', parts: [{ functionCall: { name: 'f', args: {} } }] },
      { role: 'user', parts: [{ functionResponse: { name: 'f', response: { output: 'done' } } }] },
    ]);
  });

  test('a conversation with no turn left is refused, naming messages', () => {
    for (const messages of [
      [{ role: 'system', content: 'Be terse.' }],
      [
        { role: 'developer', content: 'Be terse.' },
        { role: 'user', content: '' },
      ],
    ] as ChatMessage[][]) {
      expect(() => anthropicOf(messages)).toThrow(
        expect.objectContaining({ field: 'messages' }) as UntranslatableRequestError,
      );
      expect(() => geminiContents(messages)).toThrow(UntranslatableRequestError);
    }
  });

  test('Anthropic: empty stop sequences are left out (Anthropic refuses them)', () => {
    const messages: ChatMessage[] = [{ role: 'user', content: 'q' }];
    expect(anthropicOf(messages, { stop: ['', 'END'] }).stop_sequences).toEqual(['END']);
    expect(anthropicOf(messages, { stop: '' })).not.toHaveProperty('stop_sequences');
  });
});

describe('OpenAI usage', () => {
  test('from an upstream: cached and cache-write tokens leave the prompt, reasoning leaves the completion', () => {
    expect(
      openAIUsage({
        prompt_tokens: 100,
        completion_tokens: 40,
        prompt_tokens_details: { cached_tokens: 30, cache_write_tokens: 10 },
        completion_tokens_details: { reasoning_tokens: 25 },
      }),
    ).toEqual({
      inputTokens: 60,
      cacheReadTokens: 30,
      cacheWriteTokens: 10,
      outputTokens: 15,
      reasoningTokens: 25,
      exact: true,
    });
    expect(openAIUsage(undefined).exact).toBe(false);
  });

  test('reasoning counted beside the completion (xAI: inside total_tokens only) is charged once, never negative', () => {
    const buckets = (usage: Parameters<typeof openAIUsage>[0]) => {
      const { outputTokens, reasoningTokens, inputTokens } = openAIUsage(usage);
      return { inputTokens, outputTokens, reasoningTokens };
    };
    // As xAI answers: 14 + 2 + 317 = 333.
    const xai = {
      prompt_tokens: 14,
      completion_tokens: 2,
      total_tokens: 333,
      completion_tokens_details: { reasoning_tokens: 317 },
    };
    expect(buckets(xai)).toEqual({ inputTokens: 14, outputTokens: 2, reasoningTokens: 317 });
    // Beside, and smaller than the completion: only the total tells.
    expect(buckets({ ...xai, completion_tokens: 400, total_tokens: 731 })).toEqual({
      inputTokens: 14,
      outputTokens: 400,
      reasoningTokens: 317,
    });
    // Inside, as OpenAI counts it: the total is prompt + completion.
    expect(buckets({ ...xai, completion_tokens: 400, total_tokens: 414 })).toEqual({
      inputTokens: 14,
      outputTokens: 83,
      reasoningTokens: 317,
    });
    // Without a total, reasoning larger than the completion cannot be inside it.
    expect(buckets({ ...xai, total_tokens: undefined })).toEqual({
      inputTokens: 14,
      outputTokens: 2,
      reasoningTokens: 317,
    });
    // Cached tokens beyond the prompt were counted beside it.
    expect(
      openAIUsage({ prompt_tokens: 5, completion_tokens: 1, prompt_tokens_details: { cached_tokens: 40 } }),
    ).toMatchObject({ inputTokens: 5, cacheReadTokens: 40 });
  });

  test('to a client: the buckets add back up, with the cost beside them', () => {
    const costDetails = {
      total_usd: '1',
      provider_usd: '0.9',
      commission_usd: '0.1',
      total_pico_usd: '1000000000000',
      provider_pico_usd: '900000000000',
      commission_pico_usd: '100000000000',
    };
    expect(
      toOpenAIUsage(
        { inputTokens: 60, cacheReadTokens: 30, cacheWriteTokens: 10, outputTokens: 15, reasoningTokens: 25 },
        { cost: 1, cost_details: costDetails },
      ),
    ).toEqual({
      prompt_tokens: 100,
      completion_tokens: 40,
      total_tokens: 140,
      prompt_tokens_details: { cached_tokens: 30, cache_write_tokens: 10 },
      completion_tokens_details: { reasoning_tokens: 25 },
      cost: 1,
      cost_details: costDetails,
    });
  });

  const upstreamModel = { providerModel: 'm' };
  const limits = { outputTokens: 512 };

  test('the upstream request always streams and asks for usage, whatever the client asked', () => {
    const request = {
      messages: [{ role: 'user' as const, content: 'q' }],
      stream_options: { include_usage: false },
      max_tokens: 64,
    };
    for (const stream of [true, false])
      expect(upstreamRequestBody({ ...request, stream }, upstreamModel)(limits)).toEqual({
        messages: request.messages,
        model: 'm',
        max_tokens: 512,
        stream: true,
        stream_options: { include_usage: true },
      });
  });

  test("the limit admission decided goes in the upstream's field, or the client's own (max_tokens when it set none)", () => {
    const messages = [{ role: 'user' as const, content: 'q' }];
    expect(upstreamRequestBody({ messages }, upstreamModel)(limits)).toMatchObject({ max_tokens: 512 });
    const own = upstreamRequestBody({ messages, max_completion_tokens: 9 }, upstreamModel)(limits);
    expect(own).toMatchObject({ max_completion_tokens: 512 });
    expect(own).not.toHaveProperty('max_tokens');
    const renamed = upstreamRequestBody(
      { messages, max_completion_tokens: 9 },
      upstreamModel,
      'max_tokens',
    )(limits);
    expect(renamed).toMatchObject({ max_tokens: 512 });
    expect(renamed).not.toHaveProperty('max_completion_tokens');
    const openai = upstreamRequestBody(
      { messages, max_tokens: 9 },
      upstreamModel,
      'max_completion_tokens',
    )(limits);
    expect(openai).toMatchObject({ max_completion_tokens: 512 });
    expect(openai).not.toHaveProperty('max_tokens');
  });
});
