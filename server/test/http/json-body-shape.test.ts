import { connect } from 'node:net';
import { Readable } from 'node:stream';
import type { InjectOptions } from 'fastify';
import { afterAll, describe, expect, test, vi } from 'vitest';
import { buildApp } from '../../src/app.js';
import { MAX_BODY_NESTING, MAX_BODY_VALUES, MAX_CONTAINER_ENTRIES } from '../../src/http/json-shape-scan.js';
import { nestedJson } from '../fuzz/hostile.js';
import { testConfig } from '../support/config.js';

/**
 * A body nesting too deep or holding too many values is refused as it arrives, before JSON.parse
 * would block the event loop on it; bodies within the bounds are parsed and served as before.
 * (The deepest body the chat rules accept, 69 levels, is served in chat-validation.test.ts.)
 */
const BODY_LIMIT = 4 * 1024 * 1024;
const CHAT = '/v1/chat/completions';
const app = await buildApp(
  testConfig({ limits: { ...testConfig().limits, bodyLimitBytes: BODY_LIMIT, rateLimitMax: 100_000 } }),
  { chat: { handle: async ({ request }) => ({ messages: request.messages }) } },
);
afterAll(() => app.close());

const json = { 'content-type': 'application/json' };
const user = { role: 'user', content: 'hi' };
/** Nested arrays filling all but a byte or two of `bytes`. */
const nestedArrays = (bytes: number) => nestedJson(Math.floor(bytes / 2) - 1, 'array', '');
const post = (url: string, payload: InjectOptions['payload']) =>
  app.inject({ method: 'POST', url, headers: json, payload });

function expectRefused(res: { statusCode: number; json(): unknown }, field: string, limit: RegExp) {
  expect(res.statusCode).toBe(400);
  expect(res.json()).toMatchObject({
    data: null,
    error: { code: 'validation_error', field, message: expect.stringMatching(limit) },
    meta: { timestamp: expect.any(String) },
  });
}
const NESTING = new RegExp(`nests more than ${MAX_BODY_NESTING} levels deep`);

describe('a 4 MiB body of nested arrays, sent without credentials', () => {
  test.each([
    [CHAT, nestedArrays(BODY_LIMIT), 'body'],
    [CHAT, `{"messages":${nestedArrays(BODY_LIMIT - 20)}}`, 'messages'],
    ['/v1/authorize', `{"delegation":${nestedArrays(BODY_LIMIT - 20)}}`, 'delegation'],
  ])('POST %s: refused naming the nesting bound, never given to JSON.parse', async (url, payload, field) => {
    const parse = vi.spyOn(JSON, 'parse');
    try {
      const res = await post(url, payload);
      expect(parse.mock.calls.some(([text]) => text === payload)).toBe(false);
      expectRefused(res, field, NESTING);
    } finally {
      parse.mockRestore();
    }
  });

  test('POST /graphql: refused in GraphQL errors, never given to JSON.parse', async () => {
    const payload = `{"query":"{ __typename }","variables":${nestedArrays(BODY_LIMIT - 40)}}`;
    const parse = vi.spyOn(JSON, 'parse');
    try {
      const res = await post('/graphql', payload);
      expect(parse.mock.calls.some(([text]) => text === payload)).toBe(false);
      expect(res.statusCode).toBe(400);
      expect(res.json().errors).toEqual([
        expect.objectContaining({ message: expect.stringMatching(NESTING) }),
      ]);
    } finally {
      parse.mockRestore();
    }
  });

  test('is answered while its client is still sending it', async () => {
    await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = app.server.address() as { port: number };
    // Only the first 64 KiB of the declared 4 MiB are ever sent.
    const head = `POST ${CHAT} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${BODY_LIMIT}\r\n\r\n`;
    const answer = await new Promise<string>((resolve, reject) => {
      const received: Buffer[] = [];
      const socket = connect(port, '127.0.0.1', () =>
        socket.write(`${head}{"messages":${'['.repeat(64 * 1024)}`),
      );
      socket.on('data', (chunk) => received.push(chunk));
      socket.on('error', reject);
      socket.on('close', () => resolve(Buffer.concat(received).toString('utf8')));
    });
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer).toMatch(/\r\nconnection: close\r\n/i);
    const body = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4));
    expect(body.error).toMatchObject({ code: 'validation_error', field: 'messages' });
    expect(body.error.message).toMatch(NESTING);
  });
});

describe('the bounds', () => {
  test(`a body nesting ${MAX_BODY_NESTING} levels reaches the chat rules; one more level is refused as it arrives`, async () => {
    // The body is one level, its metadata the rest.
    const at = (levels: number) =>
      post(
        CHAT,
        `{"messages":[${JSON.stringify(user)}],"metadata":${nestedJson(levels - 2, 'object', '{}')}}`,
      );
    const deepest = await at(MAX_BODY_NESTING);
    expect(deepest.statusCode).toBe(400);
    expect(deepest.json().error).toMatchObject({
      field: 'metadata',
      message: 'metadata must nest at most 64 levels deep',
    });
    expectRefused(await at(MAX_BODY_NESTING + 1), 'metadata', NESTING);
  });

  test(`${MAX_CONTAINER_ENTRIES} messages are served; one more is refused naming messages`, async () => {
    const messages = (count: number) =>
      Array.from({ length: count }, (_, i) => ({ ...user, content: `m${i}` }));
    const served = await post(CHAT, { messages: messages(MAX_CONTAINER_ENTRIES) });
    expect(served.statusCode).toBe(200);
    expect(served.json().messages).toHaveLength(MAX_CONTAINER_ENTRIES);
    expectRefused(
      await post(CHAT, { messages: messages(MAX_CONTAINER_ENTRIES + 1) }),
      'messages',
      new RegExp(`more than ${MAX_CONTAINER_ENTRIES} entries`),
    );
  });

  test(`a body of ${MAX_BODY_VALUES} values is served; one more is refused`, async () => {
    /** A chat body holding exactly `values` array elements and object members. */
    const holding = (values: number) => {
      const groups: string[] = [];
      // Its message and metadata hold 5: messages, metadata, the message, its role and content.
      for (let left = values - 5; left > 0; ) {
        const size = Math.min(MAX_CONTAINER_ENTRIES, left - 1);
        groups.push(`[${Array(size).fill(0).join(',')}]`);
        left -= size + 1;
      }
      return `{"messages":[${JSON.stringify(user)}],"metadata":[${groups.join(',')}]}`;
    };
    expect((await post(CHAT, holding(MAX_BODY_VALUES))).statusCode).toBe(200);
    expectRefused(
      await post(CHAT, holding(MAX_BODY_VALUES + 1)),
      'body',
      new RegExp(`more than ${MAX_BODY_VALUES} values`),
    );
  });
});

describe('what the scan must not count', () => {
  /** Brackets, commas, quotes and backslashes inside strings, and characters of 2 to 4 bytes. */
  const tricky = [
    '['.repeat(MAX_BODY_NESTING + 1),
    '{'.repeat(MAX_BODY_NESTING + 1),
    ','.repeat(MAX_CONTAINER_ENTRIES + 1),
    '"]]]}}} \\ \\" \\\\[[[ "',
    'é € 😀 𝕳𝖊𝖑𝖑𝖔 \u2028 \ufeff',
    'ends in a backslash \\',
  ];
  const messages = tricky.map((content) => ({ role: 'user', content, name: '[{"' }));

  test('brackets, commas, quotes and escapes inside strings pass, as sent', async () => {
    const res = await post(CHAT, { messages });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().messages).toEqual(messages);
  });

  test('a body arriving one byte at a time, every escape and character split, passes as sent', async () => {
    const bytes = Buffer.from(JSON.stringify({ messages }));
    const res = await post(CHAT, Readable.from([...bytes].map((byte) => Buffer.from([byte]))));
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().messages).toEqual(messages);
  });

  test('a body sent without a length is still held to the body limit: 413', async () => {
    const text = Buffer.from(`{"messages":[{"role":"user","content":"${'x'.repeat(BODY_LIMIT)}"}]}`);
    const chunks = Array.from({ length: Math.ceil(text.length / 65_536) }, (_, i) =>
      text.subarray(i * 65_536, (i + 1) * 65_536),
    );
    const res = await post(CHAT, Readable.from(chunks));
    expect(res.statusCode).toBe(413);
    expect(res.json().error.code).toBe('payload_too_large');
  });
});
