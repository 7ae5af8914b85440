import OpenAI, { BadRequestError, InternalServerError } from 'openai';
import { describe, expect, test, vi } from 'vitest';
import { buildApp } from '../../src/app.js';
import { ApiError } from '../../src/http/errors.js';
import { gateDouble, recorderDouble } from '../support/chat-doubles.js';
import { testConfig } from '../support/config.js';
import { collect, failure, readUntilFailure, useHarness } from './gateway-harness.js';

const CLAUDE = 'anthropic/claude-haiku-5.5';
const GEMINI = 'google/gemini-2.5-pro';
const UPSTREAM_TIMEOUT_MS = 1000;
const COMPLETION_TIMEOUT_MS = 4000;
const HEARTBEAT_MS = 300;
const hi = [{ role: 'user' as const, content: 'Hi' }];

const h = useHarness({
  upstreamTimeoutMs: UPSTREAM_TIMEOUT_MS,
  upstreamCompletionTimeoutMs: COMPLETION_TIMEOUT_MS,
  streamHeartbeatMs: HEARTBEAT_MS,
});

/** A stream request, without the openai client's retries. */
function rawRequest(model: string): Promise<Response> {
  return fetch(`${h.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: hi, stream: true }),
  });
}

async function rawStream(model: string) {
  const res = await rawRequest(model);
  return { status: res.status, events: (await res.text()).split('\n\n').filter((event) => event !== '') };
}

describe('upstream failures before the answer began', () => {
  test('an Anthropic 400 is a 400 (BadRequestError) keeping its message; nothing recorded', async () => {
    h.anthropic.script({ httpError: { status: 400, message: 'messages.0.content: must not be empty' } });
    const error = await failure(h.client.chat.completions.create({ model: CLAUDE, messages: hi }));
    expect(error).toBeInstanceOf(BadRequestError);
    expect(error.code).toBe('provider_invalid_request');
    expect(error.type).toBe('invalid_request_error');
    expect(error.error).toMatchObject({
      details: { upstreamStatus: 400, upstreamMessage: 'messages.0.content: must not be empty' },
    });
    expect(error.message).toContain('anthropic answered 400: messages.0.content: must not be empty');
    expect(h.recorder.entries).toEqual([]);
    expect(h.gate.released).toBe(h.gate.admitted.length);
  });

  test('an overloaded Anthropic (529) on a stream request is a plain 503 envelope with Retry-After, not an event stream', async () => {
    h.anthropic.script({ httpError: { status: 529, message: 'Overloaded' } });
    const res = await fetch(`${h.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: CLAUDE, messages: hi, stream: true }),
    });
    expect(res.status).toBe(503);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.headers.get('x-settlement')).toBe('none-due');
    // Anthropic's 529 said no delay: the gateway's own.
    expect(res.headers.get('retry-after')).toBe('2');
    const body = await res.json();
    expect(body).toMatchObject({
      data: null,
      error: {
        code: 'provider_overloaded',
        type: 'server_error',
        details: { upstreamStatus: 529, upstreamMessage: 'Overloaded', retryAfterSeconds: 2 },
      },
      meta: { path: '/v1/chat/completions' },
    });
  });

  test('a Gemini 503 is a 503 keeping Google’s message', async () => {
    h.gemini.script({
      httpError: { status: 503, message: 'The model is overloaded. Please try again later.' },
    });
    const error = await failure(
      h.client.chat.completions.create({ model: GEMINI, messages: hi, stream: true }),
    );
    expect(error).toBeInstanceOf(InternalServerError);
    expect(error.status).toBe(503);
    expect(error.error).toMatchObject({
      code: 'provider_overloaded',
      details: { upstreamStatus: 503, upstreamMessage: 'The model is overloaded. Please try again later.' },
    });
  });

  test('a provider failing on its side (500) is a 502 provider_error, as before', async () => {
    h.anthropic.script({ httpError: { status: 500, message: 'Internal server error' } });
    const error = await failure(h.client.chat.completions.create({ model: CLAUDE, messages: hi }));
    expect(error.status).toBe(502);
    expect(error.error).toMatchObject({ code: 'provider_error', details: { upstreamStatus: 500 } });
    expect(error.headers?.get('retry-after')).toBeNull();
  });

  test('a whole answer generated for longer than UPSTREAM_TIMEOUT_MS is waited for, its stream coming all along', async () => {
    h.gemini.script({
      text: ['Long ', 'thought ', 'indeed.'],
      usage: { promptTokenCount: 4 },
      delayMs: 0.7 * UPSTREAM_TIMEOUT_MS,
    });
    const answer = await h.client.chat.completions.create({ model: GEMINI, messages: hi });
    expect(answer.choices[0]?.message.content).toBe('Long thought indeed.');
  });

  test('an upstream that never answers is a 504 after UPSTREAM_TIMEOUT_MS, and the call is dropped', async () => {
    h.gemini.script({ hang: true });
    const error = await failure(h.client.chat.completions.create({ model: GEMINI, messages: hi }));
    expect(error.status).toBe(504);
    expect(error.error).toMatchObject({
      code: 'provider_error',
      details: {
        upstreamStatus: null,
        upstreamMessage: `google sent nothing for ${UPSTREAM_TIMEOUT_MS} ms`,
      },
    });
    await vi.waitFor(() => expect(h.gemini.log.at(-1)!.abortedAt).toBeDefined());
    expect(h.recorder.entries).toEqual([]);
  });

  test('an unreachable provider is a 502 saying so', async () => {
    const app = await buildApp(testConfig(), { gate: gateDouble(), recorder: recorderDouble(), checks: [] });
    try {
      const res = await app.inject({
        method: 'POST',
        url: '/v1/chat/completions',
        payload: { model: CLAUDE, messages: hi },
      });
      expect(res.statusCode).toBe(502);
      expect(res.json().error).toMatchObject({ code: 'provider_error', details: { upstreamStatus: null } });
      expect(res.json().error.message).toMatch(/^anthropic failed: anthropic could not be reached/);
    } finally {
      await app.close();
    }
  });

  test('a payer the gate refuses never reaches the provider', async () => {
    h.gate.refusal = new ApiError(402, 'payment_required', 'settle your debt first');
    const before = h.anthropic.log.length;
    const error = await failure(h.client.chat.completions.create({ model: CLAUDE, messages: hi }));
    expect(error.status).toBe(402);
    expect(error.code).toBe('payment_required');
    expect(h.anthropic.log.length).toBe(before);
  });
});

describe('what the openai clients retry (each 5xx twice, by default)', () => {
  /** The official client as users build it: default retries (2). */
  const retrying = () => new OpenAI({ baseURL: `${h.url}/v1`, apiKey: 'unused-by-the-doubles' });

  test.each([
    [400, 'prompt is too long: 210000 tokens > 200000 maximum', 400, 'context_length_exceeded'],
    [413, 'Request exceeds the maximum allowed number of bytes.', 400, 'provider_invalid_request'],
  ])(
    'an upstream %i refusing the request itself is sent to the provider once: a 400',
    async (status, message, answered, code) => {
      // Scripted once: a retry would get the simulator's default answer, and succeed.
      h.anthropic.script({ httpError: { status, message } });
      const before = h.anthropic.log.length;
      const error = await failure(retrying().chat.completions.create({ model: CLAUDE, messages: hi }));
      expect(error).toBeInstanceOf(BadRequestError);
      expect(error.status).toBe(answered);
      expect(error.error).toMatchObject({
        code,
        details: { upstreamStatus: status, upstreamMessage: message },
      });
      expect(h.anthropic.log.length - before).toBe(1);
    },
  );

  test.each([
    [401, 'invalid x-api-key', 'authentication_error'],
    [404, 'model: claude-retired', 'not_found_error'],
  ])(
    "an upstream %i (the operator's key or catalog, not the request) is a 502 with x-should-retry: false, sent once",
    async (status, message, type) => {
      h.anthropic.script({ httpError: { status, message, type } });
      const before = h.anthropic.log.length;
      const error = await failure(retrying().chat.completions.create({ model: CLAUDE, messages: hi }));
      expect(error.status).toBe(502);
      expect(error.headers?.get('x-should-retry')).toBe('false');
      expect(error.error).toMatchObject({ code: 'provider_error', details: { upstreamStatus: status } });
      expect(h.anthropic.log.length - before).toBe(1);
    },
  );

  test('a stream request Gemini refuses (400 INVALID_ARGUMENT) is a 400, not retried either', async () => {
    h.gemini.script({ httpError: { status: 400, message: 'Unable to process input image.' } });
    const before = h.gemini.log.length;
    const error = await failure(
      retrying().chat.completions.create({ model: GEMINI, messages: hi, stream: true }),
    );
    expect(error).toBeInstanceOf(BadRequestError);
    expect(error.error).toMatchObject({
      code: 'provider_invalid_request',
      message: 'google answered 400: Unable to process input image.',
    });
    expect(h.gemini.log.length - before).toBe(1);
  });

  test.each([
    [429, 'rate limited', 1],
    [408, 'request timeout', undefined],
    [529, 'Overloaded', 1],
  ])(
    'an upstream %i (try again later) is still retried, after the delay the provider asked: the retry succeeds',
    async (status, message, retryAfterSeconds) => {
      h.anthropic.script({ httpError: { status, message, retryAfterSeconds } });
      const before = h.anthropic.log.length;
      const answer = await retrying().chat.completions.create({ model: CLAUDE, messages: hi });
      expect(answer.choices[0]?.message.content).toContain('echo:');
      expect(h.anthropic.log.length - before).toBe(2);
    },
  );
});

describe('failures before the first part of a stream: an HTTP error a client retries', () => {
  test('an Anthropic overload event first thing after the 200 is a 503 envelope; nothing counted, nothing recorded', async () => {
    h.anthropic.script({ text: ['never'], usage: { input_tokens: 40 }, failAfterEvents: 0 });
    const res = await rawRequest(CLAUDE);
    expect(res.status).toBe(503);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.headers.get('retry-after')).toBe('2');
    expect((await res.json()).error).toEqual({
      code: 'provider_overloaded',
      type: 'server_error',
      param: null,
      message: 'anthropic answered 529: Overloaded',
      details: { upstreamStatus: 529, upstreamMessage: 'Overloaded', retryAfterSeconds: 2 },
    });
    expect(h.recorder.entries).toEqual([]);
    expect(h.gate.released).toBe(h.gate.admitted.length);
  });

  test('an overload Anthropic reports after message_start and a ping, before any text: a 503, and nothing billed (Anthropic charges nothing for it)', async () => {
    h.anthropic.script({
      text: ['never'],
      usage: { input_tokens: 40 },
      failAfterEvents: 3, // message_start, content_block_start, ping, then the error
    });
    const res = await rawRequest(CLAUDE);
    expect(res.status).toBe(503);
    const { error } = await res.json();
    expect(error).toMatchObject({
      code: 'provider_overloaded',
      details: { upstreamStatus: 529, upstreamMessage: 'Overloaded' },
    });
    expect(error.details).not.toHaveProperty('billed');
    expect(h.recorder.entries).toEqual([]);
    expect(h.gate.released).toBe(h.gate.admitted.length);
  });

  test('a connection reset after message_start: a 502 stating what was billed, and the x402 payer is told it owes it', async () => {
    h.anthropic.script({ text: ['never'], usage: { input_tokens: 40 }, resetAfterEvents: 1, delayMs: 20 });
    h.gate.owed = { 'x-payment-owed': 'owed-after-record' };
    const res = await rawRequest(CLAUDE);
    expect(res.status).toBe(502);
    expect(res.headers.get('x-payment-owed')).toBe('owed-after-record');
    const { error } = await res.json();
    expect(error).toMatchObject({ code: 'provider_error', details: { upstreamStatus: null } });
    expect(error.details.billed).toMatchObject({
      prompt_tokens: 40,
      completion_tokens: 1,
      cost: expect.any(Number),
      cost_details: { total_pico_usd: expect.stringMatching(/^\d+$/) },
    });
    expect(h.recorder.entries.map((entry) => entry.usage)).toMatchObject([{ inputTokens: 40, exact: false }]);
  });

  test('a model thinking for longer than a second: its stream opens before its first text', async () => {
    // The thinking and its signature 0.7 s apart, the text 2.1 s in.
    h.anthropic.script({ thinking: 'Pondering.', text: ['late'], usage: { input_tokens: 4 }, delayMs: 700 });
    const started = Date.now();
    const res = await rawRequest(CLAUDE);
    const headersAfter = Date.now() - started;
    expect(res.status).toBe(200);
    expect(headersAfter).toBeLessThan(1_900);
    const text = await res.text();
    expect(Date.now() - started).toBeGreaterThanOrEqual(2_000);
    expect(text).toContain('"content":"late"');
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
    // Silent for 0.7 s at a time, the open stream got keep-alive comments.
    expect(text).toContain('\n\n: keep-alive\n\n');
  });

  test('keep-alive comments are skipped by the openai client', async () => {
    h.anthropic.script({ text: ['quiet ', 'words'], usage: { input_tokens: 4 }, delayMs: 400 });
    const chunks = await collect(
      await h.client.chat.completions.create({ model: CLAUDE, messages: hi, stream: true }),
    );
    expect(chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join('')).toBe('quiet words');
  });

  test('a Gemini error chunk first is a 502 with Google’s status', async () => {
    h.gemini.script({ text: ['alpha'], usage: { promptTokenCount: 17 }, failAfterEvents: 0 });
    const res = await rawRequest(GEMINI);
    expect(res.status).toBe(502);
    expect((await res.json()).error).toMatchObject({
      code: 'provider_error',
      details: { upstreamStatus: 500, upstreamMessage: 'An internal error has occurred. Please retry.' },
    });
    expect(h.recorder.entries).toEqual([]);
  });
});

describe('failures after the stream began', () => {
  test('an Anthropic error event after text: the text so far, then an SSE error; billed as counted, since part of the answer went out', async () => {
    h.anthropic.script({
      text: ['one ', 'two ', 'three'],
      usage: { input_tokens: 40, output_tokens: 9 },
      failAfterEvents: 5, // message_start, content_block_start, ping, "one ", "two ", then the error
    });
    const { text, error } = await readUntilFailure(
      await h.client.chat.completions.create({ model: CLAUDE, messages: hi, stream: true }),
    );
    expect(text).toBe('one two ');
    expect(error.error).toMatchObject({ code: 'provider_overloaded', details: { upstreamStatus: 529 } });
    expect(error.message).toContain('Overloaded');
    // Anthropic states the output in message_delta only: "one two " is 8 bytes, 2 tokens at 4 bytes a token.
    expect(h.recorder.entries.map((entry) => entry.usage)).toMatchObject([
      { inputTokens: 40, outputTokens: 2, exact: false },
    ]);
    expect(h.gate.released).toBe(h.gate.admitted.length);
  });

  test('a Gemini error chunk after text ends the stream with an SSE error and no [DONE]; billed as counted', async () => {
    h.gemini.script({
      text: ['alpha ', 'beta ', 'gamma'],
      usage: { promptTokenCount: 17 },
      failAfterEvents: 2,
    });
    const { status, events } = await rawStream(GEMINI);
    expect(status).toBe(200);
    const last = JSON.parse(events.at(-1)!.replace(/^data: /, ''));
    expect(last).toEqual({
      error: {
        code: 'provider_error',
        type: 'server_error',
        param: null,
        message: 'google answered 500: An internal error has occurred. Please retry.',
        details: { upstreamStatus: 500, upstreamMessage: 'An internal error has occurred. Please retry.' },
      },
    });
    expect(events).not.toContain('data: [DONE]');
    expect(events.some((event) => event.includes('"usage"'))).toBe(false);
    expect(h.recorder.entries.map((entry) => entry.usage)).toMatchObject([
      { inputTokens: 17, outputTokens: 2, exact: false },
    ]);
  });

  test('an upstream that goes silent mid-stream times out into an SSE error', async () => {
    h.anthropic.script({ text: ['a ', 'b ', 'c'], usage: { input_tokens: 5 }, hangAfterEvents: 4 });
    const { text, error } = await readUntilFailure(
      await h.client.chat.completions.create({ model: CLAUDE, messages: hi, stream: true }),
    );
    expect(text).toBe('a ');
    expect(error.error).toMatchObject({
      code: 'provider_error',
      details: {
        upstreamStatus: null,
        upstreamMessage: `anthropic sent nothing for ${UPSTREAM_TIMEOUT_MS} ms`,
      },
    });
    expect(h.recorder.entries[0]!.usage).toMatchObject({ inputTokens: 5, outputTokens: 1, exact: false });
  });

  test('a stream that ends before message_stop is an error, not a success', async () => {
    h.anthropic.script({ text: ['x', 'y'], usage: { input_tokens: 3 }, endAfterEvents: 5 });
    const { events } = await rawStream(CLAUDE);
    expect(JSON.parse(events.at(-1)!.slice(6))).toMatchObject({
      error: {
        code: 'provider_error',
        message: 'anthropic failed: the answer stream ended before message_stop',
      },
    });
    expect(events).not.toContain('data: [DONE]');
    expect(h.recorder.entries[0]!.usage).toMatchObject({ inputTokens: 3, exact: false });
  });
});

describe('a usage record that cannot be written', () => {
  test('withholds a whole answer: 500 internal_error', async () => {
    h.recorder.failure = new Error('ledger unavailable');
    h.anthropic.script({ text: 'Paid-for words.' });
    const error = await failure(h.client.chat.completions.create({ model: CLAUDE, messages: hi }));
    expect(error.status).toBe(500);
    expect(error.code).toBe('internal_error');
    expect(error.message).toContain('could not record the usage');
    expect(error.message).not.toContain('ledger unavailable');
    expect(h.gate.released).toBe(h.gate.admitted.length);
  });

  test('ends a stream with an internal_error event instead of the usage chunk and [DONE]', async () => {
    h.recorder.failure = new Error('ledger unavailable');
    h.gemini.script({ text: ['some ', 'words'] });
    const { events } = await rawStream(GEMINI);
    expect(events.at(-1)).toMatch(/^data: \{"error":\{"code":"internal_error"/);
    expect(events).not.toContain('data: [DONE]');
    expect(events.some((event) => event.includes('"usage"'))).toBe(false);
  });
});
