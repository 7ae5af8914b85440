import { gzipSync } from 'node:zlib';
import type { InjectOptions } from 'fastify';
import OpenAI, { APIError } from 'openai';
import { afterAll, describe, expect, test } from 'vitest';
import { buildApp } from '../../src/app.js';
import { SettlementStateError } from '../../src/billing/settlements.js';
import { ApiError } from '../../src/http/errors.js';
import { testConfig } from '../support/config.js';

const config = testConfig();
const app = await buildApp(config, {
  checks: [{ name: 'chain', critical: true, check: async () => ({ status: 'up' }) }],
  chat: {
    handle: async ({ request }) => {
      if (request.user === 'explode') throw new Error('connection to db-7.internal:5432 refused');
      if (request.user === 'settled-elsewhere')
        throw new SettlementStateError('settlement 01J is confirmed; it cannot become failed');
      return { ok: true };
    },
  },
});
afterAll(() => app.close());

const ISO_UTC_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const chat = (fields: object = {}) => ({ messages: [{ role: 'user', content: 'hi' }], ...fields });

function expectEnvelope(body: Record<string, unknown>, path: string) {
  expect(Object.keys(body)).toEqual(expect.arrayContaining(['data', 'error', 'meta']));
  const meta = body.meta as { timestamp: string; path: string };
  expect(meta.timestamp).toMatch(ISO_UTC_MS);
  expect(Math.abs(Date.parse(meta.timestamp) - Date.now())).toBeLessThan(60_000);
  expect(meta.path).toBe(path);
}

async function expectError(request: InjectOptions, status: number, code: string) {
  const res = await app.inject(request);
  expect(res.statusCode, res.body).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  const body = res.json();
  expectEnvelope(body, String(request.url).split('?')[0] as string);
  expect(body.data).toBeNull();
  expect(body.error.code).toBe(code);
  expect(typeof body.error.message).toBe('string');
  return { res, body };
}

describe('successful answers wear the envelope', () => {
  const sonnet = { id: 'anthropic/claude-sonnet-5.5', object: 'model' };
  test.each([
    ['/health', { status: 'ok' }],
    ['/v1/models', expect.arrayContaining([expect.objectContaining(sonnet)])],
    ['/v1/models/anthropic/claude-sonnet-5.5', sonnet],
  ])('GET %s', async (url, data) => {
    const res = await app.inject({ method: 'GET', url });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expectEnvelope(body, url);
    expect(body.error).toBeNull();
    expect(body.data).toMatchObject(data);
  });

  test('the path is the served path, without the query string', async () => {
    const res = await app.inject({ method: 'GET', url: '/v1/models?limit=5&after=x' });
    expectEnvelope(res.json(), '/v1/models');
  });
});

describe('every refusal wears the envelope, never a 500', () => {
  test.each([
    ['{"messages": ['],
    // Not JSON, though it holds a __proto__ key: still told it is not JSON, not that the key is refused.
    ['{"__proto__":1,'],
  ])('malformed JSON (%s) is 400 invalid_json, saying it is not valid JSON', async (payload) => {
    const { body } = await expectError(
      {
        method: 'POST',
        url: '/v1/chat/completions',
        headers: { 'content-type': 'application/json' },
        payload,
      },
      400,
      'invalid_json',
    );
    expect(body.error.message).toBe('the body is not valid JSON');
  });

  test('an empty JSON body is 400 invalid_json, saying it is empty', async () => {
    const { body } = await expectError(
      {
        method: 'POST',
        url: '/v1/chat/completions',
        headers: { 'content-type': 'application/json' },
        payload: '',
      },
      400,
      'invalid_json',
    );
    expect(body.error.message).toBe('the body is empty; send a JSON object');
  });

  const refusedKey = (key: string) =>
    `the key ${key} is refused anywhere in the body (it could reach an object's prototype); remove it`;

  test.each([
    [
      '/v1/chat/completions',
      '{"messages":[{"role":"user","content":"hi"}],"__proto__":{"admin":true}}',
      '__proto__',
    ],
    // Escaped, deep in the body: still the key it spells.
    ['/v1/chat/completions', '{"messages":[{"role":"user","content":{"\\u005f_proto__":{}}}]}', '__proto__'],
    ['/v1/authorize', '{"delegation":{"constructor":{"prototype":{"admin":true}}}}', 'constructor.prototype'],
  ])(
    'POST %s with a prototype-poisoning key (%s) is 400 invalid_json naming the key',
    async (url, payload, key) => {
      const { body } = await expectError(
        { method: 'POST', url, headers: { 'content-type': 'application/json' }, payload },
        400,
        'invalid_json',
      );
      expect(body.error.message).toBe(refusedKey(key));
    },
  );

  test('POST /graphql with a prototype-poisoning key is 400 naming the key, in GraphQL errors', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/graphql',
      headers: { 'content-type': 'application/json' },
      payload: '{"query":"{ __typename }","variables":{"__proto__":{"admin":true}}}',
    });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().errors).toEqual([
      expect.objectContaining({ message: refusedKey('__proto__'), extensions: { code: 'BAD_REQUEST' } }),
    ]);
  });

  test.each([
    [
      { 'content-encoding': 'gzip' },
      'content-encoding',
      'content-encoding gzip is not accepted; send the body uncompressed',
    ],
    [
      { 'content-type': 'application/json; charset=utf-16' },
      'content-type',
      'send the body as UTF-8, not utf-16',
    ],
  ])('a body sent with %o is 415 naming the header', async (headers, field, message) => {
    const { body } = await expectError(
      {
        method: 'POST',
        url: '/v1/chat/completions',
        headers: { 'content-type': 'application/json', ...headers },
        payload: JSON.stringify(chat()),
      },
      415,
      'unsupported_media_type',
    );
    expect(body.error).toMatchObject({ field, message });
  });

  test.each([
    ['POST', '/v1/embeddings', { 'content-encoding': 'gzip' }, 404, 'not_found'],
    ['POST', '/v1/embeddings', { 'content-type': 'application/json; charset=utf-16' }, 404, 'not_found'],
    ['POST', '/health', { 'content-encoding': 'gzip' }, 405, 'method_not_allowed'],
    ['PUT', '/v1/chat/completions', { 'content-encoding': 'br' }, 405, 'method_not_allowed'],
  ] as const)(
    '%s %s with %o is %i %s: the path is what is wrong first',
    async (method, url, headers, status, code) => {
      await expectError(
        {
          method,
          url,
          headers: { 'content-type': 'application/json', ...headers },
          payload: gzipSync(JSON.stringify(chat())),
        },
        status,
        code,
      );
    },
  );

  test.each([
    [{ 'content-encoding': 'identity' }],
    [{ 'content-type': 'application/json; charset=UTF-8' }],
    [{ 'content-type': 'application/json;charset="utf-8"' }],
  ])('a body sent with %o is read', async (headers) => {
    const res = await app.inject({
      method: 'POST',
      url: '/v1/chat/completions',
      headers: { 'content-type': 'application/json', ...headers },
      payload: JSON.stringify(chat()),
    });
    expect(res.statusCode, res.body).toBe(200);
  });

  test('a body that is not JSON is 415 unsupported_media_type', async () => {
    await expectError(
      {
        method: 'POST',
        url: '/v1/chat/completions',
        headers: { 'content-type': 'text/plain' },
        payload: 'hello',
      },
      415,
      'unsupported_media_type',
    );
  });

  test('form data is 415 unsupported_media_type', async () => {
    await expectError(
      {
        method: 'POST',
        url: '/v1/chat/completions',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: 'messages=hi',
      },
      415,
      'unsupported_media_type',
    );
  });

  test('a body over BODY_LIMIT_BYTES is 413 payload_too_large', async () => {
    const big = 'x'.repeat(config.limits.bodyLimitBytes);
    await expectError(
      {
        method: 'POST',
        url: '/v1/chat/completions',
        payload: chat({ messages: [{ role: 'user', content: big }] }),
      },
      413,
      'payload_too_large',
    );
  });

  test('a chunked body growing over BODY_LIMIT_BYTES is 413 over real HTTP', async () => {
    const server = await buildApp(config, { checks: [] });
    try {
      const address = await server.listen({ port: 0, host: '127.0.0.1' });
      const chunk = new TextEncoder().encode('x'.repeat(16 * 1024));
      let sent = 0;
      const body = new ReadableStream({
        pull(controller) {
          if (sent++ < 8) controller.enqueue(chunk);
          else controller.close();
        },
      });
      const res = await fetch(`${address}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
        duplex: 'half',
      } as RequestInit);
      expect(res.status).toBe(413);
      expect((await res.json()).error.code).toBe('payload_too_large');
    } finally {
      await server.close();
    }
  });

  test('a body just under BODY_LIMIT_BYTES is accepted', async () => {
    const overhead = JSON.stringify(chat({ messages: [{ role: 'user', content: '' }] })).length;
    const content = 'x'.repeat(config.limits.bodyLimitBytes - overhead);
    const res = await app.inject({
      method: 'POST',
      url: '/v1/chat/completions',
      payload: chat({ messages: [{ role: 'user', content }] }),
    });
    expect(res.statusCode).toBe(200);
  });

  test.each([
    ['GET', '/v1/models/%ZZ'],
    ['POST', '/v1/chat/completions%'],
    ['GET', '/v1/models/%E0%A4%A'],
  ] as const)(
    '%s %s (not valid percent-encoding) is 400 validation_error with x-request-id',
    async (method, url) => {
      const { res, body } = await expectError({ method, url }, 400, 'validation_error');
      expect(body.error.message).toBe('the path is not valid percent-encoding');
      expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    },
  );

  test('an unknown route is 404 not_found', async () => {
    const { body } = await expectError({ method: 'GET', url: '/v1/embeddings?x=1' }, 404, 'not_found');
    expect(body.error.message).toBe('no route for GET /v1/embeddings');
  });

  test('an unknown model id is 404 not_found', async () => {
    const { body } = await expectError({ method: 'GET', url: '/v1/models/openai/gpt-9' }, 404, 'not_found');
    expect(body.error.message).toContain('GET /v1/models');
  });

  test.each([
    ['DELETE', '/v1/models', 'GET, HEAD'],
    ['POST', '/health', 'GET, HEAD'],
    ['PUT', '/v1/models/anthropic/claude-sonnet-5.5', 'GET, HEAD'],
    ['GET', '/v1/chat/completions', 'POST'],
  ] as const)('%s %s is 405 method_not_allowed with Allow', async (method, url, allow) => {
    const { res } = await expectError({ method, url }, 405, 'method_not_allowed');
    expect(res.headers.allow).toBe(allow);
  });

  test("OpenAI's client reads the refusal's code, type and param", async () => {
    const url = await app.listen({ host: '127.0.0.1', port: 0 });
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'none', maxRetries: 0 });
    const refused = await client.chat.completions
      .create({
        model: 'anthropic/claude-sonnet-5.5',
        messages: [{ role: 'user', content: 'hi' }],
        temperature: 9,
      })
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(APIError);
    expect(refused).toMatchObject({
      status: 400,
      code: 'validation_error',
      type: 'invalid_request_error',
      param: 'temperature',
    });
  });

  test.each([
    [401, 'authentication_error'],
    [402, 'invalid_request_error'],
    [429, 'rate_limit_error'],
    [503, 'server_error'],
  ])('a %i refusal is of type %s', (status, type) => {
    expect(new ApiError(status, 'internal_error', 'x').toBody()).toMatchObject({ type, param: null });
  });

  test('a validation error is 400 in the envelope', async () => {
    const { body } = await expectError(
      { method: 'POST', url: '/v1/chat/completions', payload: chat({ top_p: 2 }) },
      400,
      'validation_error',
    );
    expect(body.error.field).toBe('top_p');
  });

  test('an error thrown inside a handler is 500 internal_error and does not leak its message', async () => {
    const { res } = await expectError(
      { method: 'POST', url: '/v1/chat/completions', payload: chat({ user: 'explode' }) },
      500,
      'internal_error',
    );
    expect(res.body).not.toContain('db-7.internal');
  });

  test('a settlement another instance finished meanwhile is 503 payments_unavailable, to retry', async () => {
    const { res } = await expectError(
      { method: 'POST', url: '/v1/chat/completions', payload: chat({ user: 'settled-elsewhere' }) },
      503,
      'payments_unavailable',
    );
    expect(res.headers['retry-after']).toBe('2');
  });
});

describe('a property the schema does not know', () => {
  const delegation = {
    delegate: `0x${'11'.repeat(20)}`,
    delegator: `0x${'22'.repeat(20)}`,
    authority: `0x${'ff'.repeat(32)}`,
    caveats: [{ enforcer: `0x${'33'.repeat(20)}`, terms: '0x' }],
    salt: '0x1',
  };

  test.each([
    ['nested', { chainId: 8453, delegation: { ...delegation, foo: 1 } }, 'delegation.foo'],
    [
      'in an array item',
      { chainId: 8453, delegation: { ...delegation, caveats: [{ ...delegation.caveats[0], x: 1 }] } },
      'delegation.caveats[0].x',
    ],
    ['at the top', { chainId: 8453, delegation, extra: true }, 'extra'],
  ])('%s is named in the field and the message', async (_where, payload, field) => {
    const { body } = await expectError(
      { method: 'POST', url: '/v1/authorize', payload },
      400,
      'validation_error',
    );
    expect(body.error).toEqual({
      code: 'validation_error',
      type: 'invalid_request_error',
      param: field,
      field,
      message: `${field} is not a known field`,
    });
  });
});

describe('request ids', () => {
  test('each answer carries an x-request-id', async () => {
    const a = await app.inject({ method: 'GET', url: '/health' });
    const b = await app.inject({ method: 'GET', url: '/health' });
    expect(a.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(b.headers['x-request-id']).not.toBe(a.headers['x-request-id']);
  });

  test("a client's x-request-id never becomes the request id (it keys the ledger); it is echoed beside it", async () => {
    const res = await app.inject({
      method: 'GET',
      url: '/nope',
      headers: { 'x-request-id': 'trace-42.a:b' },
    });
    expect(res.statusCode).toBe(404);
    expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(res.headers['x-client-request-id']).toBe('trace-42.a:b');
  });

  test.each([['has spaces in it'], ['x'.repeat(129)], ['<script>']])(
    'an unusable incoming id (%s) is not echoed',
    async (given) => {
      const res = await app.inject({ method: 'GET', url: '/health', headers: { 'x-request-id': given } });
      expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
      expect(res.headers['x-client-request-id']).toBeUndefined();
    },
  );
});
