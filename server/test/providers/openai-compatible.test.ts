import type { ChatCompletionCreateParamsNonStreaming } from 'openai/resources/chat/completions';
import { describe, expect, test } from 'vitest';
import { collect, report, useHarness, weatherReport } from './gateway-harness.js';

const MODEL = 'local/llama-3.1-8b';

const h = useHarness();

describe('an OpenAI-compatible upstream listed in the catalog', () => {
  test('an upstream counting reasoning beside the completion (xAI): answered, each token charged once', async () => {
    h.local.script({
      text: 'Yes.',
      usage: {
        prompt_tokens: 14,
        completion_tokens: 2,
        total_tokens: 333,
        completion_tokens_details: { reasoning_tokens: 317 },
      },
    });
    const answer = await h.client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Is it?' }],
    });
    expect(answer.usage).toMatchObject({
      prompt_tokens: 14,
      completion_tokens: 319,
      total_tokens: 333,
      completion_tokens_details: { reasoning_tokens: 317 },
    });
    expect(h.recorder.entries[0]!.usage).toMatchObject({
      inputTokens: 14,
      outputTokens: 2,
      reasoningTokens: 317,
    });
  });

  test('a completion passes through with the provider model id, its key, and usage details mapped', async () => {
    h.local.script({
      text: 'Bonjour.',
      usage: {
        prompt_tokens: 50,
        completion_tokens: 30,
        prompt_tokens_details: { cached_tokens: 20 },
        completion_tokens_details: { reasoning_tokens: 12 },
      },
    });
    const answer = await h.client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Salut' }],
      temperature: 0.2,
      // @ts-expect-error top_k is not in the OpenAI types; OpenAI-compatible servers like vLLM take it
      top_k: 5,
    });
    expect(answer).toMatchObject({
      model: MODEL,
      choices: [{ message: { content: 'Bonjour.' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 50, completion_tokens: 30, prompt_tokens_details: { cached_tokens: 20 } },
    });
    const sent = h.local.log.at(-1)!;
    expect(sent.path).toBe('/v1/chat/completions');
    expect(sent.headers.authorization).toBe('Bearer sk-local-test');
    expect(sent.body).toEqual({
      model: 'meta-llama/Llama-3.1-8B-Instruct',
      messages: [{ role: 'user', content: 'Salut' }],
      temperature: 0.2,
      top_k: 5,
      max_tokens: 8192,
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(h.recorder.entries[0]!.usage).toEqual({
      inputTokens: 30,
      cacheReadTokens: 20,
      cacheWriteTokens: 0,
      outputTokens: 18,
      reasoningTokens: 12,
      exact: true,
    });
  });

  test('fields the gateway does not know (they may change what the provider charges) are not sent upstream; reasoning_effort and verbosity are', async () => {
    h.local.script({ text: 'Ok.', usage: { prompt_tokens: 5, completion_tokens: 1 } });
    // Not in the openai client's types: a router's caching hint on a part, its fallback models.
    const request = {
      model: MODEL,
      messages: [
        { role: 'developer', content: 'Be brief.' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Hi', cache_control: { type: 'ephemeral', ttl: '1h' } },
            { type: 'image_url', image_url: { url: 'https://x.test/a.png', detail: 'low' } },
          ],
        },
      ],
      tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
      reasoning_effort: 'minimal',
      verbosity: 'low',
      service_tier: 'priority',
      web_search_options: {},
      modalities: ['text', 'audio'],
      models: ['openai/o1-pro'],
    };
    await h.client.chat.completions.create(request as unknown as ChatCompletionCreateParamsNonStreaming);
    expect(h.local.log.at(-1)!.body).toEqual({
      model: 'meta-llama/Llama-3.1-8B-Instruct',
      messages: [
        { role: 'system', content: 'Be brief.' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Hi' },
            { type: 'image_url', image_url: { url: 'https://x.test/a.png', detail: 'low' } },
          ],
        },
      ],
      tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
      reasoning_effort: 'minimal',
      verbosity: 'low',
      max_tokens: 8192,
      stream: true,
      stream_options: { include_usage: true },
    });
  });

  test("Structured Outputs: response_format json_schema goes upstream as given, and the openai client's parse() reads the answer", async () => {
    h.local.script({ text: JSON.stringify(report) });
    const responseFormat = { type: 'json_schema' as const, json_schema: weatherReport };
    const answer = await h.client.chat.completions.parse({
      model: MODEL,
      messages: [{ role: 'user', content: 'Oslo?' }],
      response_format: responseFormat,
    });
    expect(answer.choices[0]!.message.parsed).toEqual(report);
    expect(h.local.log.at(-1)!.body).toEqual({
      model: 'meta-llama/Llama-3.1-8B-Instruct',
      messages: [{ role: 'user', content: 'Oslo?' }],
      response_format: responseFormat,
      max_tokens: 8192,
      stream: true,
      stream_options: { include_usage: true },
    });
  });

  test('seed (64-bit, as OpenAI takes it), user and parallel_tool_calls go upstream', async () => {
    await h.client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Hi' }],
      tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
      parallel_tool_calls: false,
      seed: 2 ** 40,
      user: 'u-1',
    });
    expect(h.local.log.at(-1)!.body).toMatchObject({
      parallel_tool_calls: false,
      seed: 2 ** 40,
      user: 'u-1',
    });
  });

  test.each([
    ['seed', 1.5],
    ['user', 42],
    ['parallel_tool_calls', 'yes'],
  ])('%s of a wrong type (%j) is a 400 naming it, and nothing is sent', async (field, value) => {
    const request = { model: MODEL, messages: [{ role: 'user', content: 'Hi' }], [field]: value };
    const error = await h.client.chat.completions
      .create(request as unknown as ChatCompletionCreateParamsNonStreaming)
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ status: 400, error: { code: 'validation_error', field } });
    expect(h.local.log).toEqual([]);
    expect(h.recorder.entries).toEqual([]);
  });

  test('a stream asks the upstream for usage and relays content and tool call deltas', async () => {
    h.local.script({
      text: ['Let ', 'me ', 'look.'],
      toolCalls: [{ id: 'call_up_1', name: 'lookup', arguments: { q: 'x' } }],
      usage: { prompt_tokens: 9, completion_tokens: 7 },
    });
    const stream = await h.client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Find x' }],
      tools: [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object' } } }],
      stream: true,
      stream_options: { include_usage: false },
    });
    const chunks = await collect(stream);
    expect(h.local.log.at(-1)!.body).toMatchObject({ stream: true, stream_options: { include_usage: true } });
    expect(chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join('')).toBe('Let me look.');
    const calls = chunks.flatMap((chunk) => chunk.choices[0]?.delta.tool_calls ?? []);
    expect(calls[0]).toMatchObject({ index: 0, id: 'call_up_1', function: { name: 'lookup' } });
    expect(calls.map((call) => call.function?.arguments ?? '').join('')).toBe('{"q":"x"}');
    expect(chunks.filter((chunk) => chunk.choices.length > 0).at(-1)!.choices[0]!.finish_reason).toBe(
      'tool_calls',
    );
    expect(chunks.at(-1)!.usage).toMatchObject({ prompt_tokens: 9, completion_tokens: 7 });
    expect(h.recorder.entries[0]!.usage).toMatchObject({ inputTokens: 9, outputTokens: 7, exact: true });
  });

  test.each([false, true])(
    'an answer the upstream states no usage of (stream: %s) is served, billed for its output estimated from its text, and counted for the operator',
    async (stream) => {
      const unreported = async () => {
        const metrics = await h.app.inject({ method: 'GET', url: '/metrics' });
        const line = metrics.body.match(
          /^paygate_provider_usage_unreported_total\{provider="local"\} (\d+)$/m,
        );
        return Number(line?.[1] ?? 0);
      };
      const before = await unreported();
      h.local.script({ text: 'Unmetered.', unmetered: true });
      const request = { model: MODEL, messages: [{ role: 'user' as const, content: 'Hi' }] };
      const text = stream
        ? (await collect(await h.client.chat.completions.create({ ...request, stream: true })))
            .map((chunk) => chunk.choices[0]?.delta.content ?? '')
            .join('')
        : (await h.client.chat.completions.create(request)).choices[0]!.message.content;
      expect(text).toBe('Unmetered.');
      // "Unmetered." is 10 bytes of UTF-8: 3 tokens at 4 bytes a token, rounded up.
      expect(h.recorder.entries[0]!.usage).toMatchObject({ inputTokens: 0, outputTokens: 3, exact: false });
      expect(await unreported()).toBe(before + 1);
    },
  );

  test('an upstream taking max_completion_tokens (OpenAI) gets the limit in that field, whichever the client used', async () => {
    const asked = [{ max_tokens: 50 }, { max_completion_tokens: 60 }, {}];
    for (const limit of asked)
      await h.client.chat.completions.create({
        model: 'openai/o4-mini',
        messages: [{ role: 'user', content: 'Think.' }],
        ...limit,
      });
    const sent = h.local.log.map((request) => request.body);
    expect(sent.map((body) => body.max_completion_tokens)).toEqual([50, 60, 100000]);
    expect(sent.every((body) => !('max_tokens' in body))).toBe(true);
    expect(sent[0]).toMatchObject({ model: 'o4-mini' });
  });

  test("an upstream naming no token limit field gets the client's own field: a client of OpenAI's reasoning models keeps working", async () => {
    await h.client.chat.completions.create({
      model: 'local/o4-mini',
      messages: [{ role: 'user', content: 'Think.' }],
      max_completion_tokens: 70,
    });
    const [sent] = h.local.log.map((request) => request.body);
    expect(sent).toMatchObject({ max_completion_tokens: 70 });
    expect(sent).not.toHaveProperty('max_tokens');
  });

  test("the same reasoning model without a client's limit, behind an upstream naming no field, is refused by it: 400 with its words", async () => {
    const error = await h.client.chat.completions
      .create({ model: 'local/o4-mini', messages: [{ role: 'user', content: 'Think.' }] })
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ status: 400, error: { code: 'provider_invalid_request' } });
    expect((error as Error).message).toContain("Use 'max_completion_tokens' instead");
    expect(h.recorder.entries).toHaveLength(0);
  });
});

describe('a refusal (Structured Outputs) from an OpenAI-compatible upstream', () => {
  const refusal = "I'm sorry, I can't help with that.";
  const request = {
    model: MODEL,
    messages: [{ role: 'user' as const, content: 'Oslo?' }],
    response_format: { type: 'json_schema' as const, json_schema: weatherReport },
  };

  test("reaches the client as message.refusal with content null, which the openai client's parse() tells from an empty answer", async () => {
    h.local.script({ refusal });
    const answer = await h.client.chat.completions.parse(request);
    expect(answer.choices[0]!.message).toMatchObject({ content: null, refusal, parsed: null });
    expect(h.local.log.at(-1)!.body.response_format).toEqual(request.response_format);
  });

  test("streamed, reaches the client as delta.refusal, which the openai client's stream() gathers into message.refusal", async () => {
    h.local.script({ refusal: ["I'm sorry, ", "I can't help with that."] });
    const stream = h.client.chat.completions.stream(request);
    const chunks = await collect(stream);
    expect(chunks.map((chunk) => chunk.choices[0]?.delta.refusal ?? '').join('')).toBe(refusal);
    const final = await stream.finalChatCompletion();
    expect(final.choices[0]!.message).toMatchObject({ refusal, parsed: null });
    expect(h.local.log.at(-1)!.body).toMatchObject({
      stream: true,
      response_format: request.response_format,
    });
  });
});

describe('log probabilities', () => {
  /** The simulator's log probabilities of a token with two alternatives. */
  const token = (text: string) => {
    const bytes = (t: string) => [...Buffer.from(t)];
    return {
      token: text,
      logprob: -0.5,
      bytes: bytes(text),
      top_logprobs: [
        { token: text, logprob: -0.5, bytes: bytes(text) },
        { token: 'alt1', logprob: -1.5, bytes: bytes('alt1') },
      ],
    };
  };
  const asked = {
    model: MODEL,
    messages: [{ role: 'user' as const, content: 'Salut' }],
    logprobs: true,
    top_logprobs: 2,
  };

  test('asked of an OpenAI-compatible upstream, go to it and come back as it gave them', async () => {
    h.local.script({ text: ['Bon', 'jour.'] });
    const answer = await h.client.chat.completions.create(asked);
    expect(h.local.log.at(-1)!.body).toMatchObject({ logprobs: true, top_logprobs: 2 });
    expect(answer.choices[0]!.logprobs).toEqual({ content: [token('Bon'), token('jour.')], refusal: null });
  });

  test('streamed, come back in the chunk of each delta', async () => {
    h.local.script({ text: ['Bon', 'jour.'] });
    const chunks = await collect(await h.client.chat.completions.create({ ...asked, stream: true }));
    expect(h.local.log.at(-1)!.body).toMatchObject({ logprobs: true, top_logprobs: 2 });
    const withLogprobs = chunks.filter((chunk) => chunk.choices[0]?.logprobs != null);
    expect(withLogprobs.map((chunk) => chunk.choices[0]!.delta.content)).toEqual(['Bon', 'jour.']);
    expect(withLogprobs.flatMap((chunk) => chunk.choices[0]!.logprobs!.content)).toEqual([
      token('Bon'),
      token('jour.'),
    ]);
  });

  test.each([
    ['anthropic/claude-sonnet-4.5', { logprobs: true }, false, 'logprobs'],
    ['anthropic/claude-sonnet-4.5', { logprobs: false, top_logprobs: 3 }, true, 'top_logprobs'],
    ['google/gemini-2.5-flash', { logprobs: true, top_logprobs: 3 }, true, 'logprobs'],
    ['google/gemini-2.5-flash', { top_logprobs: 1 }, false, 'top_logprobs'],
  ])(
    'asked of %s (%j, stream: %s), which gives none: a 400 naming %s, before anything is sent or billed',
    async (model, fields, stream, field) => {
      h.anthropic.log.length = 0;
      h.gemini.log.length = 0;
      const request = { model, messages: [{ role: 'user', content: 'Hi' }], stream, ...fields };
      const error = await h.client.chat.completions
        .create(request as unknown as ChatCompletionCreateParamsNonStreaming)
        .catch((e: unknown) => e);
      expect(error).toMatchObject({ status: 400, error: { code: 'validation_error', field } });
      expect([...h.anthropic.log, ...h.gemini.log]).toEqual([]);
      expect(h.recorder.entries).toEqual([]);
    },
  );

  test('not asked for (false, 0) of a family that gives none: answered', async () => {
    for (const model of ['anthropic/claude-sonnet-4.5', 'google/gemini-2.5-flash']) {
      const answer = await h.client.chat.completions.create({
        model,
        messages: [{ role: 'user', content: 'Hi' }],
        logprobs: false,
        top_logprobs: 0,
      });
      expect(answer.choices[0]!.logprobs).toBeNull();
    }
  });
});
