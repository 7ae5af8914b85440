import { afterAll, describe, expect, test } from 'vitest';
import { buildApp } from '../../src/app.js';
import { testConfig } from '../support/config.js';

/** The chat handler is another part's job: here it only shows which requests get through validation. */
const app = await buildApp(testConfig({ limits: { rateLimitMax: 100_000 } as never }), {
  chat: { handle: async ({ model, request }) => ({ served: model.id, request }) },
});
afterAll(() => app.close());

const user = { role: 'user', content: 'hi' };
const tool = { type: 'function', function: { name: 'get_weather', parameters: { type: 'object' } } };
const call = { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{}' } };
/** A Structured Outputs response format, as `zodResponseFormat` and pydantic models make them. */
const jsonSchema = {
  name: 'weather_report',
  description: 'The weather of a city',
  schema: {
    type: 'object',
    properties: { city: { type: 'string' }, celsius: { type: 'number' } },
    required: ['city', 'celsius'],
    additionalProperties: false,
  },
  strict: true,
};
const withJsonSchema = (fields: Record<string, unknown>) => ({
  type: 'json_schema',
  json_schema: { ...jsonSchema, ...fields },
});
/** An object `levels` levels deep, itself counted: `nested(2)` is `{x: {}}`. */
const nested = (levels: number) => {
  let value: Record<string, unknown> = {};
  for (let i = 1; i < levels; i++) value = { x: value };
  return value;
};
const toolTurn = [
  user,
  { role: 'assistant', content: null, tool_calls: [call] },
  { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
];

async function post(body: unknown) {
  const res = await app.inject({ method: 'POST', url: '/v1/chat/completions', payload: body as object });
  return { status: res.statusCode, body: res.json() };
}

const withUser = (fields: Record<string, unknown>) => ({
  model: 'anthropic/claude-sonnet-5.5',
  messages: [user],
  ...fields,
});

describe('accepted just inside each bound', () => {
  const cases: Array<[string, Record<string, unknown>]> = [
    ['temperature 0', withUser({ temperature: 0 })],
    ['temperature 2', withUser({ temperature: 2 })],
    ['temperature null', withUser({ temperature: null })],
    ['top_p 0', withUser({ top_p: 0 })],
    ['top_p 1', withUser({ top_p: 1 })],
    ['frequency_penalty -2', withUser({ frequency_penalty: -2 })],
    ['frequency_penalty 2', withUser({ frequency_penalty: 2 })],
    ['presence_penalty -2', withUser({ presence_penalty: -2 })],
    ['presence_penalty 2', withUser({ presence_penalty: 2 })],
    ['max_tokens 1', withUser({ max_tokens: 1 })],
    ['max_tokens at the model maximum', withUser({ max_tokens: 128_000 })],
    ['max_completion_tokens 1', withUser({ max_completion_tokens: 1 })],
    ['max_completion_tokens at the model maximum', withUser({ max_completion_tokens: 128_000 })],
    ['top_k 1', withUser({ top_k: 1 })],
    ['logprobs with top_logprobs 0', withUser({ logprobs: true, top_logprobs: 0 })],
    ['logprobs with top_logprobs 20', withUser({ logprobs: true, top_logprobs: 20 })],
    ['n 1', withUser({ n: 1 })],
    ['stop as a string', withUser({ stop: '\n' })],
    ['stop as 4 strings', withUser({ stop: ['a', 'b', 'c', 'd'] })],
    ['stop as an empty list', withUser({ stop: [] })],
    ['stop null', withUser({ stop: null })],
    ['response_format text', withUser({ response_format: { type: 'text' } })],
    ['response_format json_object', withUser({ response_format: { type: 'json_object' } })],
    [
      'response_format json_schema (Structured Outputs)',
      withUser({ response_format: { type: 'json_schema', json_schema: jsonSchema } }),
    ],
    [
      'response_format json_schema with a name only, strict null',
      withUser({ response_format: { type: 'json_schema', json_schema: { name: 'x', strict: null } } }),
    ],
    [
      'response_format json_schema named with 64 characters, dashes and underscores',
      withUser({ response_format: withJsonSchema({ name: `A-b_9${'x'.repeat(59)}` }) }),
    ],
    [
      'response_format json_schema nested 64 levels deep',
      withUser({ response_format: withJsonSchema({ schema: nested(64) }) }),
    ],
    [
      'a tool call whose extra_content nests 64 levels deep',
      withUser({
        messages: [
          user,
          { role: 'assistant', content: null, tool_calls: [{ ...call, extra_content: nested(64) }] },
          { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
        ],
      }),
    ],
    [
      "OpenAI's reasoning and caching fields",
      withUser({
        reasoning_effort: 'minimal',
        verbosity: 'low',
        logit_bias: { '50256': -100 },
        prompt_cache_key: 'k',
        safety_identifier: null,
      }),
    ],
    ['seed, user and parallel_tool_calls', withUser({ seed: -7, user: 'u-1', parallel_tool_calls: false })],
    [
      'seed, user and parallel_tool_calls null',
      withUser({ seed: null, user: null, parallel_tool_calls: null }),
    ],
    ['stream with usage', withUser({ stream: true, stream_options: { include_usage: true } })],
    ['tools without tool_choice', withUser({ tools: [tool] })],
    ['tool_choice none without tools', withUser({ tool_choice: 'none' })],
    ['tool_choice auto without tools', withUser({ tool_choice: 'auto' })],
    ['tool_choice required with tools', withUser({ tools: [tool], tool_choice: 'required' })],
    [
      'tool_choice naming a tool',
      withUser({ tools: [tool], tool_choice: { type: 'function', function: { name: 'get_weather' } } }),
    ],
    ['a system message', withUser({ messages: [{ role: 'system', content: 'be brief' }, user] })],
    ['an empty string content', withUser({ messages: [{ role: 'user', content: '' }] })],
    [
      'user content parts: text and image_url',
      withUser({
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'what is this?' },
              { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=', detail: 'low' } },
            ],
          },
        ],
      }),
    ],
    [
      'system content as text parts',
      withUser({ messages: [{ role: 'system', content: [{ type: 'text', text: 'x' }] }, user] }),
    ],
    ['an assistant turn with tool_calls and a tool result', withUser({ messages: toolTurn, tools: [tool] })],
    [
      'a developer message (the system role of newer OpenAI models)',
      withUser({ messages: [{ role: 'developer', content: 'Be terse.' }, user] }),
    ],
    [
      'an assistant turn with text',
      withUser({
        messages: [user, { role: 'assistant', content: 'hello' }, { role: 'user', content: 'bye' }],
      }),
    ],
    [
      'unknown extra fields, top level and in messages',
      withUser({
        store: false,
        metadata: { tag: 'x' },
        messages: [{ ...user, name: 'alice', cache_control: { type: 'ephemeral' } }],
      }),
    ],
  ];
  test.each(cases)('%s', async (_name, body) => {
    const res = await post(body);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.served).toBe('anthropic/claude-sonnet-5.5');
  });

  test('an omitted model is the configured default model', async () => {
    const res = await post({ messages: [user] });
    expect(res.status).toBe(200);
    expect(res.body.served).toBe(testConfig().defaultModel);
  });

  test('another catalog model is served as named', async () => {
    const res = await post(withUser({ model: 'google/gemini-3.8-flash', max_tokens: 65_536 }));
    expect(res.status).toBe(200);
    expect(res.body.served).toBe('google/gemini-3.8-flash');
  });

  test('a json_schema response format reaches the handler as given', async () => {
    const format = { type: 'json_schema', json_schema: jsonSchema };
    const res = await post(withUser({ response_format: format }));
    expect(res.body.request.response_format).toEqual(format);
  });

  test('unknown fields reach the handler untouched (ignored, not stripped or refused)', async () => {
    const res = await post(withUser({ store: false, metadata: { tag: 'x' } }));
    expect(res.body.request).toMatchObject({ store: false, metadata: { tag: 'x' } });
  });
});

describe('refused just outside each bound, naming the field', () => {
  const withTools = (fields: Record<string, unknown>) => withUser({ tools: [tool], ...fields });
  const withMessages = (...messages: unknown[]) => withUser({ messages });
  const cases: Array<[string, Record<string, unknown>, string]> = [
    ['temperature below 0', withUser({ temperature: -0.01 }), 'temperature'],
    ['temperature above 2', withUser({ temperature: 2.01 }), 'temperature'],
    ['temperature as a string', withUser({ temperature: '1' }), 'temperature'],
    ['top_p below 0', withUser({ top_p: -0.01 }), 'top_p'],
    ['top_p above 1', withUser({ top_p: 1.01 }), 'top_p'],
    ['frequency_penalty below -2', withUser({ frequency_penalty: -2.01 }), 'frequency_penalty'],
    ['frequency_penalty above 2', withUser({ frequency_penalty: 2.01 }), 'frequency_penalty'],
    ['presence_penalty below -2', withUser({ presence_penalty: -2.01 }), 'presence_penalty'],
    ['presence_penalty above 2', withUser({ presence_penalty: 2.01 }), 'presence_penalty'],
    ['max_tokens 0', withUser({ max_tokens: 0 }), 'max_tokens'],
    ['max_tokens fractional', withUser({ max_tokens: 1.5 }), 'max_tokens'],
    ['max_tokens as a string', withUser({ max_tokens: '10' }), 'max_tokens'],
    ['max_tokens above the model maximum', withUser({ max_tokens: 128_001 }), 'max_tokens'],
    ['max_completion_tokens 0', withUser({ max_completion_tokens: 0 }), 'max_completion_tokens'],
    [
      'max_completion_tokens above the model maximum',
      withUser({ max_completion_tokens: 128_001 }),
      'max_completion_tokens',
    ],
    ['top_k 0', withUser({ top_k: 0 }), 'top_k'],
    ['top_k fractional', withUser({ top_k: 2.5 }), 'top_k'],
    ['logprobs as a string', withUser({ logprobs: 'true' }), 'logprobs'],
    ['top_logprobs below 0', withUser({ logprobs: true, top_logprobs: -1 }), 'top_logprobs'],
    ['top_logprobs above 20', withUser({ logprobs: true, top_logprobs: 21 }), 'top_logprobs'],
    ['top_logprobs fractional', withUser({ logprobs: true, top_logprobs: 1.5 }), 'top_logprobs'],
    ['n 0', withUser({ n: 0 }), 'n'],
    ['n 2', withUser({ n: 2 }), 'n'],
    ['stop with 5 strings', withUser({ stop: ['a', 'b', 'c', 'd', 'e'] }), 'stop'],
    ['stop with a number inside', withUser({ stop: ['a', 1] }), 'stop'],
    ['stop as a number', withUser({ stop: 3 }), 'stop'],
    [
      'response_format json_schema without json_schema',
      withUser({ response_format: { type: 'json_schema' } }),
      'response_format.json_schema',
    ],
    [
      'response_format json_schema not an object',
      withUser({ response_format: { type: 'json_schema', json_schema: 'weather_report' } }),
      'response_format.json_schema',
    ],
    [
      'response_format json_schema without name',
      withUser({ response_format: { type: 'json_schema', json_schema: { schema: jsonSchema.schema } } }),
      'response_format.json_schema.name',
    ],
    [
      'response_format json_schema with an empty name',
      withUser({ response_format: withJsonSchema({ name: '' }) }),
      'response_format.json_schema.name',
    ],
    [
      'response_format json_schema with a name with a space',
      withUser({ response_format: withJsonSchema({ name: 'weather report' }) }),
      'response_format.json_schema.name',
    ],
    [
      'response_format json_schema with a name of 65 characters',
      withUser({ response_format: withJsonSchema({ name: 'x'.repeat(65) }) }),
      'response_format.json_schema.name',
    ],
    [
      'response_format json_schema with a name that is not a string',
      withUser({ response_format: withJsonSchema({ name: 7 }) }),
      'response_format.json_schema.name',
    ],
    [
      'response_format json_schema with a schema that is a string',
      withUser({ response_format: withJsonSchema({ schema: '{"type":"object"}' }) }),
      'response_format.json_schema.schema',
    ],
    [
      'response_format json_schema with a schema that is an array',
      withUser({ response_format: withJsonSchema({ schema: [{ type: 'object' }] }) }),
      'response_format.json_schema.schema',
    ],
    [
      'response_format json_schema with strict a string',
      withUser({ response_format: withJsonSchema({ strict: 'true' }) }),
      'response_format.json_schema.strict',
    ],
    [
      'response_format json_schema with a description that is not a string',
      withUser({ response_format: withJsonSchema({ description: ['weather'] }) }),
      'response_format.json_schema.description',
    ],
    [
      'response_format json_schema nested more than 64 levels deep',
      withUser({ response_format: withJsonSchema({ schema: nested(65) }) }),
      'response_format.json_schema.schema',
    ],
    [
      'response_format with another key nested more than 64 levels deep',
      withUser({ response_format: { type: 'json_object', x: nested(70) } }),
      'response_format',
    ],
    [
      'a tool call whose extra_content nests more than 64 levels deep',
      withUser({
        messages: [
          user,
          { role: 'assistant', content: null, tool_calls: [{ ...call, extra_content: nested(66) }] },
        ],
      }),
      'messages',
    ],
    ['response_format without type', withUser({ response_format: {} }), 'response_format.type'],
    ['response_format as a string', withUser({ response_format: 'json' }), 'response_format'],
    ['tools not a list', withUser({ tools: tool }), 'tools'],
    ['a tool without function', withUser({ tools: [{ type: 'function' }] }), 'tools[0].function'],
    ['a tool of another type', withUser({ tools: [{ ...tool, type: 'retrieval' }] }), 'tools[0].type'],
    [
      'a tool name with a space',
      withUser({ tools: [{ type: 'function', function: { name: 'get weather' } }] }),
      'tools[0].function.name',
    ],
    [
      'a tool name of 65 characters',
      withUser({ tools: [{ type: 'function', function: { name: 'x'.repeat(65) } }] }),
      'tools[0].function.name',
    ],
    [
      'tool parameters not an object',
      withUser({ tools: [{ type: 'function', function: { name: 'f', parameters: 'x' } }] }),
      'tools[0].function.parameters',
    ],
    ['a tool defined twice', withUser({ tools: [tool, tool] }), 'tools[1].function.name'],
    ['tool_choice of an unknown kind', withTools({ tool_choice: 'any' }), 'tool_choice'],
    ['tool_choice object without function', withTools({ tool_choice: { type: 'function' } }), 'tool_choice'],
    ['tool_choice required without tools', withUser({ tool_choice: 'required' }), 'tool_choice'],
    [
      'tool_choice naming a function without tools',
      withUser({ tool_choice: { type: 'function', function: { name: 'get_weather' } } }),
      'tool_choice',
    ],
    [
      'tool_choice naming an undefined tool',
      withTools({ tool_choice: { type: 'function', function: { name: 'nope' } } }),
      'tool_choice.function.name',
    ],
    ['messages missing', { model: 'anthropic/claude-sonnet-5.5' }, 'messages'],
    ['messages empty', withUser({ messages: [] }), 'messages'],
    ['messages not a list', withUser({ messages: user }), 'messages'],
    ['a message without role', withMessages({ content: 'hi' }), 'messages[0].role'],
    ['a message of an unknown role', withMessages({ role: 'critic', content: 'hi' }), 'messages[0].role'],
    ['user content null', withMessages({ role: 'user', content: null }), 'messages[0].content'],
    ['user content missing', withMessages({ role: 'user' }), 'messages[0].content'],
    ['system content null', withMessages({ role: 'system', content: null }, user), 'messages[0].content'],
    ['content a number', withMessages({ role: 'user', content: 5 }), 'messages[0].content'],
    ['content parts empty', withMessages({ role: 'user', content: [] }), 'messages[0].content'],
    [
      'a content part of an unknown type',
      withMessages({ role: 'user', content: [{ type: 'video_url' }] }),
      'messages[0].content[0].type',
    ],
    [
      'a text part without text',
      withMessages({ role: 'user', content: [{ type: 'text' }] }),
      'messages[0].content[0].text',
    ],
    [
      'an image part without image_url',
      withMessages({ role: 'user', content: [{ type: 'image_url' }] }),
      'messages[0].content[0].image_url',
    ],
    [
      'an image part with an empty url',
      withMessages({ role: 'user', content: [{ type: 'image_url', image_url: { url: '' } }] }),
      'messages[0].content[0].image_url.url',
    ],
    [
      'an image part with an unknown detail',
      withMessages({
        role: 'user',
        content: [{ type: 'image_url', image_url: { url: 'https://x/y.png', detail: 'max' } }],
      }),
      'messages[0].content[0].image_url.detail',
    ],
    [
      'an image in a system message',
      withMessages(
        { role: 'system', content: [{ type: 'image_url', image_url: { url: 'https://x/y.png' } }] },
        user,
      ),
      'messages[0].content[0].type',
    ],
    ['a name that is not a string', withMessages({ ...user, name: 5 }), 'messages[0].name'],
    [
      'tool_call_id on a user message',
      withMessages({ ...user, tool_call_id: 'call_1' }),
      'messages[0].tool_call_id',
    ],
    ['tool_calls on a user message', withMessages({ ...user, tool_calls: [call] }), 'messages[0].tool_calls'],
    [
      'an assistant message with neither content nor tool_calls',
      withMessages(user, { role: 'assistant', content: null }),
      'messages[1].content',
    ],
    [
      'an assistant tool call without id',
      withMessages(user, { role: 'assistant', tool_calls: [{ ...call, id: undefined }] }),
      'messages[1].tool_calls[0].id',
    ],
    [
      'an assistant tool call of another type',
      withMessages(user, { role: 'assistant', tool_calls: [{ ...call, type: 'code' }] }),
      'messages[1].tool_calls[0].type',
    ],
    [
      'tool call arguments as an object',
      withMessages(user, {
        role: 'assistant',
        tool_calls: [{ ...call, function: { name: 'f', arguments: {} } }],
      }),
      'messages[1].tool_calls[0].function.arguments',
    ],
    [
      'a thought signature that is not a string',
      withMessages(user, {
        role: 'assistant',
        tool_calls: [{ ...call, extra_content: { google: { thought_signature: 42 } } }],
      }),
      'messages[1].tool_calls[0].extra_content.google.thought_signature',
    ],
    [
      'a tool message without tool_call_id',
      withMessages(toolTurn[0], toolTurn[1], { role: 'tool', content: 'sunny' }),
      'messages[2].tool_call_id',
    ],
    [
      'a tool message without content',
      withMessages(toolTurn[0], toolTurn[1], { role: 'tool', tool_call_id: 'call_1', content: null }),
      'messages[2].content',
    ],
    [
      'a tool message answering no earlier tool call',
      withMessages(toolTurn[0], toolTurn[1], { role: 'tool', tool_call_id: 'call_9', content: 'sunny' }),
      'messages[2].tool_call_id',
    ],
    [
      'a tool message before any tool call',
      withMessages(user, { role: 'tool', tool_call_id: 'call_1', content: 'sunny' }),
      'messages[1].tool_call_id',
    ],
    ['model empty', withUser({ model: '' }), 'model'],
    ['model not a string', withUser({ model: 5 }), 'model'],
    ['reasoning_effort not an effort', withUser({ reasoning_effort: 'max' }), 'reasoning_effort'],
    ['verbosity not a level', withUser({ verbosity: 'terse' }), 'verbosity'],
    ['logit_bias keyed by a word', withUser({ logit_bias: { hello: 5 } }), 'logit_bias'],
    ['logit_bias above 100', withUser({ logit_bias: { '50256': 101 } }), 'logit_bias[50256]'],
    ['prompt_cache_key a number', withUser({ prompt_cache_key: 5 }), 'prompt_cache_key'],
    ['seed fractional', withUser({ seed: 1.5 }), 'seed'],
    ['seed as a string', withUser({ seed: '7' }), 'seed'],
    ['user a number', withUser({ user: 42 }), 'user'],
    ['parallel_tool_calls a string', withUser({ parallel_tool_calls: 'yes' }), 'parallel_tool_calls'],
  ];
  test.each(cases)('%s', async (_name, body, field) => {
    const res = await post(body);
    expect(res.status, JSON.stringify(res.body)).toBe(400);
    expect(res.body.data).toBeNull();
    expect(res.body.error.code).toBe('validation_error');
    expect(res.body.error.field).toBe(field);
    expect(res.body.error.message.startsWith(`${field} `)).toBe(true);
    expect(res.body.error.message).not.toMatch(/NOT|pattern|integer,|number,/);
  });

  test('a body that is not an object', async () => {
    const res = await post([user]);
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'validation_error', field: 'body' });
  });

  test('an unknown model is unsupported_model and says how to list the models', async () => {
    const res = await post(withUser({ model: 'openai/gpt-9' }));
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'unsupported_model', field: 'model' });
    expect(res.body.error.message).toContain('openai/gpt-9');
    expect(res.body.error.message).toContain('GET /v1/models');
  });

  test('the model maximum is named in the message', async () => {
    const res = await post(withUser({ max_tokens: 128_001 }));
    expect(res.body.error.message).toBe('max_tokens must be <= 128000 for anthropic/claude-sonnet-5.5');
  });
});
