import fc from 'fast-check';
import type { LightMyRequestResponse } from 'fastify';
import { getAddress } from 'viem';
import { afterAll, describe, expect, test } from 'vitest';
import { buildApp } from '../../src/app.js';
import type { GraphqlErrorCode } from '../../src/graphql/errors.js';
import { testConfig } from '../support/config.js';
import { hostileJson, hostileString, RUNS } from './hostile.js';

/** Hostile GraphQL requests: never a 500, always the GraphQL error format with a code. */
const ADMIN_TOKEN = 'fuzz-admin-token-0123456789';
// A body limit far above GraphQL's own size limits, so hostile queries that large reach GraphQL.
const app = await buildApp(
  testConfig({
    adminToken: ADMIN_TOKEN,
    limits: { rateLimitMax: 1_000_000, bodyLimitBytes: 4 * 1024 * 1024 } as never,
  }),
  {
    checks: [],
  },
);
afterAll(() => app.close());

const CODES: ReadonlySet<GraphqlErrorCode> = new Set<GraphqlErrorCode>([
  'GRAPHQL_PARSE_FAILED',
  'GRAPHQL_VALIDATION_FAILED',
  'BAD_USER_INPUT',
  'BAD_REQUEST',
  'UNAUTHENTICATED',
  'FORBIDDEN',
  'QUERY_TOO_DEEP',
  'QUERY_TOO_COMPLEX',
]);

function expectGraphqlAnswer(res: LightMyRequestResponse, sent: unknown) {
  const context = `${res.statusCode} ${res.body.slice(0, 400)}\nfor ${JSON.stringify(sent)?.slice(0, 400)}`;
  expect(res.statusCode, context).not.toBe(500);
  expect([200, 400, 401, 403, 405, 413, 415], context).toContain(res.statusCode);
  expect(res.headers['content-type'], context).toMatch(/^application\/json/);
  const body = res.json();
  if (body.error !== undefined && body.meta !== undefined) {
    // Refused before GraphQL (body parsing, media type, size): the gateway's envelope.
    expect(body, context).toMatchObject({
      data: null,
      error: { code: expect.any(String), message: expect.any(String) },
    });
    return;
  }
  expect(body, context).toHaveProperty('data');
  if (body.errors === undefined) return;
  expect(body.errors.length, context).toBeGreaterThan(0);
  for (const error of body.errors) {
    expect(typeof error.message, context).toBe('string');
    expect(CODES.has(error.extensions?.code), context).toBe(true);
  }
}

const bearer = fc.constantFrom(undefined, `Bearer ${ADMIN_TOKEN}`, 'Bearer not-a-token', 'Basic x', 'Bearer');

const fieldNames = fc.constantFrom(
  'me',
  'usage',
  'settlements',
  'spend',
  'wallet',
  'debt',
  'owed',
  'usd',
  'edges',
  'node',
  'records',
  '__typename',
  '__schema',
  'nope',
);

/** Selection sets nested `depth` levels, text-built so any depth is cheap. */
const deepQuery = fc
  .tuple(fc.integer({ min: 1, max: 20_000 }), fieldNames)
  .map(([depth, field]) => `{${` ${field} {`.repeat(depth)} __typename ${'}'.repeat(depth)}}`);

/** Many aliases of the same field: breadth instead of depth. */
const wideQuery = fc
  .tuple(
    fc.integer({ min: 1, max: 3_000 }),
    fc.constantFrom('me { wallet }', 'usage(first: 100) { edges { node { requestId } } }', '__typename'),
  )
  .map(
    ([count, selection]) => `{${Array.from({ length: count }, (_, i) => ` a${i}: ${selection}`).join('')} }`,
  );

/** Well-formed queries with hostile argument values. */
const hostileArguments = fc
  .tuple(hostileString, fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), hostileString, hostileString)
  .map(
    ([wallet, first, after, date]) =>
      `{ usage(wallet: ${JSON.stringify(wallet)}, first: ${first}, after: ${JSON.stringify(after)}, from: ${JSON.stringify(date)}) { edges { node { requestId } } } me(wallet: ${JSON.stringify(wallet)}) { wallet } }`,
  );

const fragmentCycle = fc.constant(
  'query { me { ...A } } fragment A on Me { ...B } fragment B on Me { ...A }',
);

/** JSON where a query belongs: mercurius would take it as a ready-made syntax tree. */
const jsonAsQuery = fc.oneof(
  hostileJson.map((value) => JSON.stringify(value) ?? 'null'),
  fc.constant(
    '{"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"me"}}]}}]}',
  ),
);

/** Which operation runs: none without a name, or by a name the request may not match. */
const twoOperations = fc.constant('query A { me { wallet } } query B { __typename }');

const query = fc.oneof(
  hostileString,
  deepQuery,
  wideQuery,
  hostileArguments,
  fragmentCycle,
  jsonAsQuery,
  twoOperations,
  fc.constant('{ me { wallet } }'),
);

describe('hostile GraphQL: never a 500, always the GraphQL error format with a code', () => {
  test('random, deep, wide and ill-typed queries, with or without a bearer', async () => {
    await fc.assert(
      fc.asyncProperty(
        query,
        bearer,
        fc.option(hostileJson),
        fc.option(hostileString),
        async (text, authorization, variables, operationName) => {
          const payload = { query: text, variables, operationName };
          const res = await app.inject({
            method: 'POST',
            url: '/graphql',
            headers: authorization === undefined ? {} : { authorization },
            payload,
          });
          expectGraphqlAnswer(res, payload);
        },
      ),
      { numRuns: RUNS },
    );
  });

  test('bodies that are not a GraphQL request at all', async () => {
    await fc.assert(
      fc.asyncProperty(hostileJson, async (body) => {
        const res = await app.inject({
          method: 'POST',
          url: '/graphql',
          headers: { 'content-type': 'application/json' },
          payload: JSON.stringify(body) ?? 'null',
        });
        expectGraphqlAnswer(res, body);
      }),
      { numRuns: RUNS },
    );
  });

  test('queries in the URL (GET)', async () => {
    const operationName = fc.option(fc.oneof(fc.constantFrom('A', 'B'), hostileString));
    await fc.assert(
      fc.asyncProperty(query, fc.option(hostileString), operationName, async (text, variables, name) => {
        const params = new URLSearchParams({ query: text.slice(0, 8_000) });
        if (variables !== null) params.set('variables', variables);
        if (name !== null) params.set('operationName', name);
        const res = await app.inject({ method: 'GET', url: `/graphql?${params}` });
        expectGraphqlAnswer(res, params.toString());
      }),
      { numRuns: Math.ceil(RUNS / 3) },
    );
  });

  test('GraphQL still answers after all of it', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/graphql',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      payload: { query: '{ me(wallet: "0x00000000000000000000000000000000000000aa") { wallet } }' },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().data.me.wallet).toBe(getAddress('0x00000000000000000000000000000000000000aa'));
  });
});
