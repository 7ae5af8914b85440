import fc from 'fast-check';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { buildApp } from '../../src/app.js';
import { gateDouble, recorderDouble } from '../support/chat-doubles.js';
import { testConfig } from '../support/config.js';
import { expectAlive, expectNoServerFault, RUNS } from './hostile.js';

/**
 * Hostile paths: stray and broken percent-encodings, under every route's prefix. Whether the path
 * decodes or not, the answer is the envelope with a stable code and the request id, never
 * Fastify's own body.
 */
let app: FastifyInstance;
beforeAll(async () => {
  app = await buildApp(testConfig({ limits: { rateLimitMax: 1_000_000 } as never }), {
    gate: gateDouble(),
    recorder: recorderDouble(),
    checks: [],
  });
});
afterAll(() => app.close());

const prefix = fc.constantFrom(
  '/',
  '/v1/models/',
  '/v1/chat/completions',
  '/v1/authorize',
  '/health',
  '/graphql',
  '/v1/',
);
/** Bits of paths: valid and broken escapes (`%`, `%Z`, `%E0%A4`, overlong UTF-8), and plain characters. */
const piece = fc.oneof(
  fc.constantFrom(
    '%',
    '%Z',
    '%ZZ',
    '%0',
    '%00',
    '%2F',
    '%25',
    '%E0%A4',
    '%C0%AF',
    '%ED%A0%80',
    '%FF',
    '%F4%90%80%80',
  ),
  fc.integer({ min: 0, max: 255 }).map((byte) => `%${byte.toString(16).padStart(2, '0')}`),
  fc.stringMatching(/^[A-Za-z0-9._~\-/]{0,4}$/),
);
const path = fc
  .tuple(prefix, fc.array(piece, { maxLength: 6 }))
  .map(([start, rest]) => start + rest.join(''))
  // `//…` names a host, not a path; /graphql answers in GraphQL's own format (docs/api.md, GraphQL).
  .filter((url) => !url.startsWith('//') && decodedOrSelf(url) !== '/graphql');

function decodedOrSelf(url: string): string {
  try {
    return decodeURIComponent(url);
  } catch {
    return url;
  }
}

test('any path gets the envelope and a request id', async () => {
  await fc.assert(
    fc.asyncProperty(path, fc.constantFrom('GET', 'POST', 'DELETE', 'PUT'), async (url, method) => {
      const res = await app.inject({ method: method as 'GET', url });
      // As the request arrives (light-my-request resolves dot segments, as WHATWG URLs do).
      expectNoServerFault(res, new URL(url, 'http://gateway').pathname, `${method} ${url}`);
      expect(res.headers['x-request-id'], `${method} ${url}`).toMatch(/^[0-9a-f-]{36}$/);
    }),
    { numRuns: RUNS },
  );
  await expectAlive(app);
});
