import { connect } from 'node:net';
import fc from 'fast-check';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startAnthropicSimulator } from '../../devkit/simulators/anthropic.js';
import { startGeminiSimulator } from '../../devkit/simulators/gemini.js';
import { startOpenAICompatibleSimulator } from '../../devkit/simulators/openai-compatible.js';
import { buildApp } from '../../src/app.js';
import { MAX_BODY_NESTING } from '../../src/http/json-shape-scan.js';
import { testCatalog } from '../support/catalog.js';
import { gateDouble, recorderDouble } from '../support/chat-doubles.js';
import { testConfig } from '../support/config.js';
import {
  expectAlive,
  expectNoServerFault,
  hostileJson,
  hostileString,
  mutated,
  nestedJson,
  RUNS,
} from './hostile.js';

/**
 * Hostile chat bodies against the real route, validation and provider adapters (talking to the
 * simulators over HTTP); the payment gate lets everything through, so whatever passes validation
 * reaches a provider translation.
 */
const PATH = '/v1/chat/completions';
const BODY_LIMIT = 64 * 1024;

const simulators: Array<{ close(): Promise<void> }> = [];
let app: FastifyInstance;

beforeAll(async () => {
  const [anthropic, gemini, local] = await Promise.all([
    startAnthropicSimulator({ log: false }),
    startGeminiSimulator({ log: false }),
    startOpenAICompatibleSimulator({ log: false }),
  ]);
  simulators.push(anthropic, gemini, local);
  const catalog = testCatalog({
    upstreams: { local: { baseUrl: `${local.url}/v1` } },
    models: [
      {
        id: 'local/echo',
        provider: 'local',
        providerModel: 'echo',
        name: 'Echo',
        contextLength: 8192,
        maxOutputTokens: 4096,
        pricing: { input: '0.05', output: '0.10' },
      },
    ],
  });
  app = await buildApp(
    testConfig({
      providers: {
        anthropic: { apiKey: 'sk-ant-test', baseUrl: anthropic.url },
        google: { apiKey: 'gemini-test', baseUrl: gemini.url },
      },
      limits: { bodyLimitBytes: BODY_LIMIT, rateLimitMax: 1_000_000 } as never,
    }),
    { gate: gateDouble(), recorder: recorderDouble(), checks: [], catalog },
  );
});
afterAll(async () => {
  await app?.close();
  await Promise.all(simulators.map((simulator) => simulator.close()));
});

const MODELS = ['anthropic/claude-sonnet-5.5', 'google/gemini-3.8-flash', 'local/echo'];
const tool = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'weather',
    parameters: { type: 'object', properties: { city: { type: 'string' } } },
  },
};
const call = {
  id: 'call_1',
  type: 'function',
  function: { name: 'get_weather', arguments: '{"city":"Paris"}' },
};

/** Valid requests exercising every part of the schema; the mutations start from them. */
const TEMPLATES = MODELS.flatMap((model) => [
  { model, messages: [{ role: 'user', content: 'hi' }] },
  {
    model,
    stream: true,
    stream_options: { include_usage: true },
    temperature: 0.5,
    top_p: 0.9,
    max_tokens: 16,
    stop: ['\n\n'],
    messages: [
      { role: 'system', content: 'be brief' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'describe' },
          { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=', detail: 'low' } },
        ],
      },
    ],
  },
  {
    model,
    tools: [tool],
    tool_choice: { type: 'function', function: { name: 'get_weather' } },
    response_format: { type: 'json_object' },
    messages: [
      { role: 'user', content: 'weather?' },
      { role: 'assistant', content: null, tool_calls: [call] },
      { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
      { role: 'user', content: 'thanks', name: 'bob' },
    ],
  },
]);

/** Writes raw bytes to the gateway's socket; resolves with what came back before it closed (or went quiet). */
function exchangeRaw(port: number, bytes: Buffer): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const socket = connect(port, '127.0.0.1', () => socket.end(bytes));
    const done = () => resolve(Buffer.concat(chunks).toString('latin1'));
    socket.on('data', (chunk) => {
      chunks.push(chunk);
      // One answer is enough: keep-alive would otherwise hold the socket open.
      socket.destroy();
      done();
    });
    socket.on('error', done);
    socket.on('close', done);
    socket.setTimeout(2_000, () => socket.destroy());
  });
}

async function post(payload: string | Buffer, contentType = 'application/json') {
  return app.inject({ method: 'POST', url: PATH, headers: { 'content-type': contentType }, payload });
}

/**
 * The property: no server fault; a provider error only when the simulator really answered one (it
 * refuses what the real API refuses); a 200 is a real completion or event stream.
 */
async function check(payload: string | Buffer, sent: unknown = payload) {
  const res = await post(payload);
  const body = expectNoServerFault(res, PATH, sent) as {
    error: { code: string; details?: { upstreamStatus?: unknown } };
  };
  if (res.statusCode === 502 || res.statusCode === 504)
    expect(body.error.details?.upstreamStatus, `${res.body}\nfor ${String(sent).slice(0, 300)}`).toEqual(
      expect.any(Number),
    );
  if (res.statusCode === 200) {
    if (String(res.headers['content-type']).startsWith('text/event-stream'))
      expect(res.body).toContain('data: ');
    else expect(res.json()).toMatchObject({ object: 'chat.completion' });
  }
  return res;
}

describe('hostile chat bodies: never a 500, always the envelope with a clear code', () => {
  test('any JSON value as the body', async () => {
    await fc.assert(
      fc.asyncProperty(hostileJson, async (body) => {
        await check(JSON.stringify(body) ?? 'null', body);
      }),
      { numRuns: RUNS },
    );
  });

  test('a valid request with one field replaced, removed or added (wrong types, unicode, poison keys)', async () => {
    await fc.assert(
      fc.asyncProperty(mutated(TEMPLATES), async (body) => {
        await check(JSON.stringify(body) ?? 'null', body);
      }),
      { numRuns: RUNS * 2 },
    );
  });

  test('unicode, lone surrogates and control characters in every text a provider receives', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...MODELS),
        hostileString,
        hostileString,
        fc.boolean(),
        async (model, text, name, stream) => {
          // JSON.stringify escapes lone surrogates (\ud800), which JSON.parse turns back into them.
          const body = {
            model,
            stream,
            messages: [
              { role: 'system', content: text },
              { role: 'user', content: [{ type: 'text', text }], name },
              {
                role: 'assistant',
                content: null,
                tool_calls: [
                  { ...call, function: { name: 'get_weather', arguments: JSON.stringify({ city: text }) } },
                ],
              },
              { role: 'tool', tool_call_id: 'call_1', content: text },
            ],
            tools: [{ ...tool, function: { ...tool.function, description: text } }],
            stop: text === '' ? undefined : [text],
          };
          await check(JSON.stringify(body), body);
        },
      ),
      { numRuns: RUNS },
    );
  });

  test('deep nesting anywhere a free-form value is accepted', async () => {
    /** The body, tools, the tool, function and parameters hold `properties`. */
    const PROPERTIES_LEVELS = 5;
    const spots: Array<(nested: string) => string> = [
      (nested) => nested,
      (nested) => `{"messages":${nested}}`,
      (nested) => `{"messages":[{"role":"user","content":${nested}}]}`,
      (nested) => `{"messages":[{"role":"user","content":"hi"}],"metadata":${nested}}`,
      (nested) =>
        `{"model":"MODEL","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":${nested}}}}]}`,
      (nested) => `{"messages":[{"role":"user","content":"hi"}],"stream_options":${nested}}`,
    ];
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...spots),
        fc.constantFrom(...MODELS),
        fc.integer({ min: 1, max: 12_000 }),
        fc.constantFrom('array' as const, 'object' as const),
        async (spot, model, depth, kind) => {
          const payload = spot(nestedJson(depth, kind)).replace('MODEL', model);
          const res = await check(payload);
          if (payload.includes('"properties":') && depth >= 64 && payload.length <= BODY_LIMIT)
            expect(res.json().error).toMatchObject(
              depth + PROPERTIES_LEVELS <= MAX_BODY_NESTING
                ? { code: 'validation_error', field: 'tools[0].function.parameters' }
                : // Refused as it arrives, named by its top-level field.
                  {
                    code: 'validation_error',
                    field: 'tools',
                    message: expect.stringContaining(`at most ${MAX_BODY_NESTING} levels`),
                  },
            );
        },
      ),
      { numRuns: Math.ceil(RUNS / 3) },
    );
  });

  test('strings sized around the body limit, in one and in several bytes per character', async () => {
    const overhead = JSON.stringify({ model: MODELS[2], messages: [{ role: 'user', content: '' }] }).length;
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: -64, max: 64 }),
        fc.constantFrom('x', 'é', '€', '😀', '\\u0000', '\\ud800'),
        async (delta, unit) => {
          const units = Math.max(0, Math.floor((BODY_LIMIT - overhead + delta) / Buffer.byteLength(unit)));
          const payload = `{"model":"${MODELS[2]}","messages":[{"role":"user","content":"${unit.repeat(units)}"}]}`;
          const res = await check(payload, `${unit} x ${units}`);
          if (Buffer.byteLength(payload) > BODY_LIMIT) expect(res.statusCode).toBe(413);
        },
      ),
      { numRuns: Math.ceil(RUNS / 5) },
    );
  });

  test('bytes that are not JSON or not UTF-8, under any content type', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.uint8Array({ maxLength: 2048 }),
        fc.constantFrom(
          'application/json',
          'application/json; charset=utf-16',
          'application/json; charset=latin1',
          'application/merge-patch+json',
          'text/plain',
          'application/octet-stream',
          'multipart/form-data; boundary=x',
          '',
        ),
        async (bytes, contentType) => {
          const res = await post(Buffer.from(bytes), contentType);
          expectNoServerFault(
            res,
            PATH,
            `${contentType}: ${Buffer.from(bytes).toString('hex').slice(0, 200)}`,
          );
          expect(res.statusCode).toBeGreaterThanOrEqual(400);
        },
      ),
      { numRuns: RUNS },
    );
  });

  test('malformed HTTP on the wire: a 4xx or a closed socket, and the process keeps serving', async () => {
    const address = await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = new URL(address);
    const requestBytes = fc.oneof(
      fc.uint8Array({ maxLength: 4096 }).map((bytes) => Buffer.from(bytes)),
      fc
        .tuple(hostileString, hostileString)
        .map(([target, header]) =>
          Buffer.from(`POST /v1/chat/completions${target} HTTP/1.1\r\nHost: x\r\nX: ${header}\r\n\r\n`),
        ),
      fc
        .integer({ min: 10_000, max: 100_000 })
        .map((size) =>
          Buffer.from(`GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(size)}\r\n\r\n`),
        ),
      fc
        .constantFrom(
          'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
          'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n',
          'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n',
          'GET / HTTP/9.9\r\n\r\n',
        )
        .map((text) => Buffer.from(text)),
    );
    await fc.assert(
      fc.asyncProperty(requestBytes, async (bytes) => {
        const answer = await exchangeRaw(Number(port), bytes);
        const status = /^HTTP\/1\.[01] (\d{3})/.exec(answer)?.[1];
        if (status !== undefined) expect(Number(status), answer.slice(0, 300)).toBeLessThan(500);
      }),
      { numRuns: Math.ceil(RUNS / 3) },
    );
    expect((await fetch(`${address}/v1/models`)).status).toBe(200);
  });

  test('the gateway still serves after all of it', async () => {
    await expectAlive(app);
    const res = await post(JSON.stringify(TEMPLATES[0]));
    expect(res.statusCode).toBe(200);
  });
});
