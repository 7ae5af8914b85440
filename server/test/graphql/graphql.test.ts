import type { FastifyInstance } from 'fastify';
import { getIntrospectionQuery } from 'graphql';
import { type KyselyPlugin, sql } from 'kysely';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import { buildApp } from '../../src/app.js';
import { issueAccessToken } from '../../src/auth/jwt.js';
import { recordUsage } from '../../src/billing/ledger.js';
import {
  confirmSettlement,
  failSettlement,
  markSettlementSent,
  openSettlement,
} from '../../src/billing/settlements.js';
import type { GatewayConfig } from '../../src/config.js';
import type { Store } from '../../src/store/database.js';
import { insertSession, revokeSession } from '../../src/store/sessions.js';
import { testConfig } from '../support/config.js';
import { createTestDatabase, type TestDatabase, testDialects } from '../support/db.js';

const ADMIN_TOKEN = 'operator-token-for-tests-0123';
const alice = privateKeyToAddress(generatePrivateKey());
const bob = privateKeyToAddress(generatePrivateKey());
const day = (n: number, hour = 12) => new Date(Date.UTC(2030, 0, n, hour));
const tx = `0x${'ab'.repeat(32)}` as const;

async function seed(store: Store) {
  const expiresAt = new Date(Date.now() + 3_600_000);
  for (const [id, wallet] of [
    ['session-alice', alice],
    ['session-bob', bob],
    ['session-revoked', alice],
  ] as const)
    await insertSession(store, {
      id,
      wallet,
      delegation: '{}',
      delegationHash: `0x${id.padEnd(64, '0').replace(/[^0-9a-f]/g, '0')}`.slice(0, 66) as `0x${string}`,
      signature: '0x00',
      limits: '{}',
      expiresAt,
    });
  await revokeSession(store, 'session-revoked');
  // Alice: 3 days x 2 models; day 1 and 2 are then settled.
  let n = 0;
  for (const d of [1, 2, 3])
    for (const model of ['anthropic/claude-sonnet-5.5', 'google/gemini-3.8-flash'] as const) {
      n++;
      if (d === 3 && model.startsWith('google')) continue;
      await recordUsage(store, {
        requestId: `alice-${d}-${model.split('/')[0]}`,
        payer: alice,
        rail: 'session',
        model,
        usage: {
          inputTokens: 10 * n,
          cacheReadTokens: n,
          cacheWriteTokens: 0,
          outputTokens: 3 * n,
          reasoningTokens: 1,
          exact: n !== 2,
        },
        cost: {
          providerPicoUsd: 3_750_000n * BigInt(n),
          commissionPicoUsd: 375_000n * BigInt(n),
          totalPicoUsd: 4_125_000n * BigInt(n),
        },
        createdAt: day(d, n),
      });
      if (d === 2 && model.startsWith('google')) {
        const opened = await openSettlement(store, alice, 'session');
        await markSettlementSent(store, opened!.id, tx);
        await confirmSettlement(store, opened!.id, { txHash: tx, blockNumber: 77n });
      }
    }
  await recordUsage(store, {
    requestId: 'bob-secret',
    payer: bob,
    rail: 'x402',
    model: 'anthropic/claude-opus-5.5',
    usage: {
      inputTokens: 1,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
      outputTokens: 1,
      reasoningTokens: 0,
      exact: true,
    },
    cost: { providerPicoUsd: 30_000_000n, commissionPicoUsd: 3_000_000n, totalPicoUsd: 33_000_000n },
    createdAt: day(2),
  });
  const failed = await openSettlement(store, bob, 'x402');
  await failSettlement(store, failed!.id, 'transfer reverted');
}

const aliases = (count: number, selection: string) =>
  `{ ${Array.from({ length: count }, (_, i) => `a${i}: ${selection}`).join(' ')} }`;

/**
 * The queries the dashboard sends (web/src/gateway/graphql.ts), read from its source so that this
 * test follows them. A computed specifier: the web package is type-checked by its own tsconfig.
 */
async function dashboardQueries(): Promise<Record<'ACCOUNT_QUERY' | 'SPEND_QUERY' | 'USAGE_QUERY', string>> {
  return import(new URL('../../../web/src/gateway/graphql.ts', import.meta.url).href);
}

describe.each(testDialects)('GraphQL over the ledger on %s', (dialect) => {
  let database: TestDatabase;
  let store: Store;
  let app: FastifyInstance;
  let aliceToken: string;
  let bobToken: string;

  beforeAll(async () => {
    database = await createTestDatabase(dialect);
    store = await database.open();
    await seed(store);
    // PostgreSQL: the app opens and migrates the database named by its config, as in production.
    app = await buildApp(
      testConfig({ adminToken: ADMIN_TOKEN, databaseUrl: database.url }),
      dialect === 'sqlite' ? { store } : {},
    );
    const expiresAt = new Date(Date.now() + 3_600_000);
    aliceToken = issueAccessToken(app, { wallet: alice, sessionId: 'session-alice', expiresAt });
    bobToken = issueAccessToken(app, { wallet: bob, sessionId: 'session-bob', expiresAt });
  });
  afterAll(async () => {
    await app?.close();
    await database.drop();
  });

  async function gql(query: string, variables: Record<string, unknown> = {}, token?: string) {
    const res = await app.inject({
      method: 'POST',
      url: '/graphql',
      headers: token ? { authorization: `Bearer ${token}` } : {},
      payload: { query, variables },
    });
    return { status: res.statusCode, body: res.json() };
  }

  /** A request as a client builds it: its parameters in the URL for GET, as the JSON body for POST. */
  async function send(method: 'GET' | 'POST', params: Record<string, string>, token?: string) {
    const res = await app.inject({
      method,
      url: method === 'GET' ? `/graphql?${new URLSearchParams(params)}` : '/graphql',
      headers: token ? { authorization: `Bearer ${token}` } : {},
      payload: method === 'POST' ? params : undefined,
    });
    return { status: res.statusCode, body: res.json() };
  }

  const codes = (body: { errors?: Array<{ extensions?: { code?: string } }> }) =>
    (body.errors ?? []).map((error) => error.extensions?.code);

  test('me: the wallet, its exact debt and its totals', async () => {
    const { status, body } = await gql(
      `{ me { wallet
             debt { owed { usd picoUsd } unpaid { usd } credit { usd picoUsd } owedAtomic }
             totals { settlements settledUsd settledAtomic
                      usage { requests promptTokens completionTokens reasoningTokens cost { usd picoUsd } commission { usd } } } } }`,
      {},
      aliceToken,
    );
    expect(status).toBe(200);
    expect(body.errors).toBeUndefined();
    // Settled: records 1..4 = 4_125_000 * 10 = 41_250_000 pico -> 42 atomic, 750_000 credit.
    // Unpaid: record 5 = 20_625_000 pico; owed 19_875_000 -> 20 atomic.
    expect(body.data.me).toEqual({
      wallet: alice,
      debt: {
        owed: { usd: '0.000019875', picoUsd: '19875000' },
        unpaid: { usd: '0.000020625' },
        credit: { usd: '0.00000075', picoUsd: '750000' },
        owedAtomic: '20',
      },
      totals: {
        settlements: 1,
        settledUsd: '0.000042',
        settledAtomic: '42',
        usage: {
          requests: '5',
          promptTokens: String(10 * 15 + 15),
          completionTokens: String(3 * 15 + 5),
          reasoningTokens: '5',
          cost: { usd: '0.000061875', picoUsd: '61875000' },
          commission: { usd: '0.000005625' },
        },
      },
    });
  });

  const usageQuery = `query Usage($first: Int, $after: String, $model: String, $from: DateTime, $to: DateTime, $wallet: String) {
    usage(first: $first, after: $after, model: $model, from: $from, to: $to, wallet: $wallet) {
      edges { cursor node { requestId model rail createdAt exact
        tokens { prompt completion input cacheRead cacheWrite output reasoning }
        cost { provider { usd } commission { usd } total { usd picoUsd } }
        settlement { status txHash amountUsd amountAtomic blockNumber } } }
      pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } }`;

  test.runIf(dialect === 'postgres')(
    'a query the database cancels (held past DATABASE_QUERY_TIMEOUT_MS) is SERVICE_UNAVAILABLE, not an internal error',
    async () => {
      const base = testConfig();
      const impatient = await buildApp(
        testConfig({
          adminToken: ADMIN_TOKEN,
          databaseUrl: database.url,
          limits: { ...base.limits, databaseQueryTimeoutMs: 200 },
        }),
      );
      try {
        // As a migration building an index would, for longer than the timeout.
        const held = store.db.transaction().execute(async (trx) => {
          await sql`lock table usage_records in access exclusive mode`.execute(trx);
          await new Promise((resolve) => setTimeout(resolve, 1_000));
        });
        await new Promise((resolve) => setTimeout(resolve, 50));
        const res = await impatient.inject({
          method: 'POST',
          url: '/graphql',
          headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
          payload: { query: `{ usage(wallet: "${alice}", first: 1) { edges { node { requestId } } } }` },
        });
        await held;
        const body = res.json();
        expect(body.errors[0]).toMatchObject({
          message: 'the ledger cannot be read now; retry shortly',
          extensions: { code: 'SERVICE_UNAVAILABLE' },
        });
      } finally {
        await impatient.close();
      }
    },
  );

  test('usage pages newest first with stable cursors, each record with its cost and settlement', async () => {
    const seen: string[] = [];
    let after: string | null = null;
    for (let pages = 0; pages < 10; pages++) {
      const { body } = await gql(usageQuery, { first: 2, after }, aliceToken);
      expect(body.errors).toBeUndefined();
      const connection = body.data.usage;
      seen.push(...connection.edges.map((edge: { node: { requestId: string } }) => edge.node.requestId));
      if (pages === 0) {
        // A request completing meanwhile is newer than every page: it does not shift the next ones.
        await recordUsage(store, {
          requestId: 'alice-late',
          payer: alice,
          rail: 'session',
          model: 'anthropic/claude-sonnet-5.5',
          usage: {
            inputTokens: 1,
            cacheReadTokens: 0,
            cacheWriteTokens: 0,
            outputTokens: 0,
            reasoningTokens: 0,
            exact: true,
          },
          cost: { providerPicoUsd: 0n, commissionPicoUsd: 0n, totalPicoUsd: 0n },
          createdAt: day(9),
        });
      }
      if (!connection.pageInfo.hasNextPage) break;
      after = connection.pageInfo.endCursor;
    }
    expect(seen).toEqual([
      'alice-3-anthropic',
      'alice-2-google',
      'alice-2-anthropic',
      'alice-1-google',
      'alice-1-anthropic',
    ]);

    const { body } = await gql(
      usageQuery,
      { first: 1, after: null, model: 'google/gemini-3.8-flash' },
      aliceToken,
    );
    expect(body.data.usage.edges[0].node).toEqual({
      requestId: 'alice-2-google',
      model: 'google/gemini-3.8-flash',
      rail: 'session',
      createdAt: day(2, 4).toISOString(),
      exact: true,
      tokens: {
        prompt: 44,
        completion: 13,
        input: 40,
        cacheRead: 4,
        cacheWrite: 0,
        output: 12,
        reasoning: 1,
      },
      cost: {
        provider: { usd: '0.000015' },
        commission: { usd: '0.0000015' },
        total: { usd: '0.0000165', picoUsd: '16500000' },
      },
      settlement: {
        status: 'confirmed',
        txHash: tx,
        amountUsd: '0.000042',
        amountAtomic: '42',
        blockNumber: '77',
      },
    });
    expect(body.data.usage.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: false });
  });

  test('usage filters by model and by [from, to)', async () => {
    const ids = async (variables: Record<string, unknown>) => {
      const { body } = await gql(usageQuery, { first: 100, ...variables }, aliceToken);
      expect(body.errors).toBeUndefined();
      return body.data.usage.edges.map((edge: { node: { requestId: string } }) => edge.node.requestId);
    };
    expect(await ids({ model: 'google/gemini-3.8-flash' })).toEqual(['alice-2-google', 'alice-1-google']);
    expect(await ids({ from: '2030-01-02', to: '2030-01-03' })).toEqual([
      'alice-2-google',
      'alice-2-anthropic',
    ]);
    expect(await ids({ from: '2030-01-02T03:00:00Z', to: '2030-01-02T04:00:00Z' })).toEqual([
      'alice-2-anthropic',
    ]);
    expect(await ids({ model: 'anthropic/claude-sonnet-5.5', from: '2030-01-03' })).toEqual([
      'alice-late',
      'alice-3-anthropic',
    ]);
    expect(await ids({ model: 'nope' })).toEqual([]);
  });

  test('settlements page with their records; a failed one has released them', async () => {
    const { body } = await gql(
      `{ settlements(first: 5) { edges { node { status rail amountUsd amountAtomic recordCount
            recordsTotal { usd } creditBefore { usd } carried { usd picoUsd } txHash confirmedAt
            records(first: 10) { edges { node { requestId } } } } } pageInfo { hasNextPage } } }`,
      {},
      aliceToken,
    );
    expect(body.errors).toBeUndefined();
    const [settlement] = body.data.settlements.edges.map((edge: { node: unknown }) => edge.node);
    expect(settlement).toMatchObject({
      status: 'confirmed',
      rail: 'session',
      amountUsd: '0.000042',
      amountAtomic: '42',
      recordCount: 4,
      recordsTotal: { usd: '0.00004125' },
      creditBefore: { usd: '0' },
      carried: { usd: '0.00000075', picoUsd: '750000' },
      txHash: tx,
    });
    expect(
      settlement.records.edges.map((edge: { node: { requestId: string } }) => edge.node.requestId),
    ).toEqual(['alice-2-google', 'alice-2-anthropic', 'alice-1-google', 'alice-1-anthropic']);

    const failed = await gql(
      `{ settlements(status: failed) { edges { node { status failureReason recordCount records { edges { node { requestId } } } } } } }`,
      {},
      bobToken,
    );
    expect(failed.body.data.settlements.edges).toEqual([
      {
        node: {
          status: 'failed',
          failureReason: 'transfer reverted',
          recordCount: 1,
          records: { edges: [] },
        },
      },
    ]);
    const none = await gql('{ settlements(status: confirmed) { edges { cursor } } }', {}, bobToken);
    expect(none.body.data.settlements.edges).toEqual([]);
  });

  test('spend aggregates by UTC day and by model', async () => {
    const { body } = await gql(
      `{ byDay: spend(groupBy: DAY, from: "2030-01-01", to: "2030-01-04") { key usage { requests cost { usd } } }
         byModel: spend(groupBy: MODEL, to: "2030-01-04") { key usage { requests promptTokens cost { picoUsd } } } }`,
      {},
      aliceToken,
    );
    expect(body.errors).toBeUndefined();
    expect(body.data.byDay).toEqual([
      { key: '2030-01-01', usage: { requests: '2', cost: { usd: '0.000012375' } } },
      { key: '2030-01-02', usage: { requests: '2', cost: { usd: '0.000028875' } } },
      { key: '2030-01-03', usage: { requests: '1', cost: { usd: '0.000020625' } } },
    ]);
    expect(body.data.byModel).toEqual([
      {
        key: 'anthropic/claude-sonnet-5.5',
        usage: {
          requests: '3',
          promptTokens: String(11 + 33 + 55),
          cost: { picoUsd: String(4_125_000 * 9) },
        },
      },
      {
        key: 'google/gemini-3.8-flash',
        usage: { requests: '2', promptTokens: String(22 + 44), cost: { picoUsd: String(4_125_000 * 6) } },
      },
    ]);
  });

  describe('authorization', () => {
    test('without a token every field is UNAUTHENTICATED', async () => {
      const { status, body } = await gql('{ me { wallet } }');
      expect(status).toBe(200);
      expect(body.data).toBeNull();
      expect(codes(body)).toEqual(['UNAUTHENTICATED']);
    });

    test('a wallet never sees another wallet: its own data only, and FORBIDDEN when it names another', async () => {
      const own = await gql(usageQuery, { first: 100 }, bobToken);
      expect(
        own.body.data.usage.edges.map((edge: { node: { requestId: string } }) => edge.node.requestId),
      ).toEqual(['bob-secret']);
      for (const query of [
        '{ me(wallet: $w) { wallet debt { owed { usd } } } }',
        '{ usage(wallet: $w) { edges { node { requestId } } } }',
        '{ settlements(wallet: $w) { edges { node { id } } } }',
        '{ spend(wallet: $w, groupBy: MODEL) { key } }',
      ]) {
        const { body } = await gql(`query ($w: String) ${query}`, { w: alice.toLowerCase() }, bobToken);
        expect(body.data).toBeNull();
        expect(codes(body)).toEqual(['FORBIDDEN']);
        expect(JSON.stringify(body)).not.toContain('alice-');
      }
      const self = await gql(
        'query ($w: String) { me(wallet: $w) { wallet } }',
        { w: bob.toLowerCase() },
        bobToken,
      );
      expect(self.body.data.me.wallet).toBe(bob);
    });

    test('the operator token reads any wallet it names, and must name one', async () => {
      const { body } = await gql(usageQuery, { first: 100, wallet: bob }, ADMIN_TOKEN);
      expect(
        body.data.usage.edges.map((edge: { node: { requestId: string } }) => edge.node.requestId),
      ).toEqual(['bob-secret']);
      const me = await gql(`{ me(wallet: "${alice}") { wallet debt { owedAtomic } } }`, {}, ADMIN_TOKEN);
      expect(me.body.data.me).toEqual({ wallet: alice, debt: { owedAtomic: '20' } });
      const unnamed = await gql('{ me { wallet } }', {}, ADMIN_TOKEN);
      expect(codes(unnamed.body)).toEqual(['BAD_USER_INPUT']);
      const malformed = await gql('{ me(wallet: "0x1234") { wallet } }', {}, ADMIN_TOKEN);
      expect(codes(malformed.body)).toEqual(['BAD_USER_INPUT']);
    });

    test('a token accepted once is refused once it expires', async () => {
      const start = Date.now();
      const token = issueAccessToken(app, {
        wallet: alice,
        sessionId: 'session-alice',
        expiresAt: new Date(start + 2_000),
      });
      expect((await gql('{ me { wallet } }', {}, token)).body.data.me).toEqual({ wallet: alice });
      vi.useFakeTimers({ toFake: ['Date'], now: start + 3_000 });
      try {
        const { body } = await gql('{ me { wallet } }', {}, token);
        expect(codes(body)).toEqual(['UNAUTHENTICATED']);
        expect(body.errors[0].message).toMatch(/expired/);
      } finally {
        vi.useRealTimers();
      }
    });

    test('forged, expired and revoked-session tokens are UNAUTHENTICATED', async () => {
      const hour = 3_600_000;
      const expired = issueAccessToken(app, {
        wallet: alice,
        sessionId: 'session-alice',
        expiresAt: new Date(Date.now() - hour),
      });
      const revoked = issueAccessToken(app, {
        wallet: alice,
        sessionId: 'session-revoked',
        expiresAt: new Date(Date.now() + hour),
      });
      const unknown = issueAccessToken(app, {
        wallet: alice,
        sessionId: 'no-such-session',
        expiresAt: new Date(Date.now() + hour),
      });
      const [header, , signature] = aliceToken.split('.');
      const tampered = `${header}.${Buffer.from(JSON.stringify({ sub: bob, sid: 'session-alice', exp: 4_000_000_000 })).toString('base64url')}.${signature}`;
      const claims = { sub: alice, sid: 'session-alice', exp: Math.floor(Date.now() / 1000) + 3600 };
      const otherAlgorithm = app.jwt.sign(claims, { algorithm: 'HS512' });
      expect(JSON.parse(Buffer.from(otherAlgorithm.split('.')[0]!, 'base64url').toString()).alg).toBe(
        'HS512',
      );
      const unsigned = `${Buffer.from('{"alg":"none","typ":"JWT"}').toString('base64url')}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.`;
      for (const [token, message] of [
        [otherAlgorithm, /not valid/],
        [unsigned, /not valid/],
        [expired, /expired/],
        [revoked, /revoked or has expired/],
        [unknown, /revoked or has expired/],
        [tampered, /not valid/],
        ['not-a-token', /not valid/],
      ] as const) {
        const { body } = await gql('{ me { wallet } }', {}, token);
        expect(codes(body)).toEqual(['UNAUTHENTICATED']);
        expect(body.errors[0].message).toMatch(message);
      }
    });
  });

  describe("the operator's view", () => {
    test('commission by day and rail, failed settlements and the largest debts, across wallets', async () => {
      const { status, body } = await gql(
        `{ operator {
          economics(from: "2030-01-01", to: "2030-01-05") { day rail requests commission { picoUsd } settlements gasSpentWei }
          settlements(status: failed) { edges { node { payer rail failureReason } } }
          topDebtors(first: 5) { wallet unpaid { picoUsd } proven }
        } }`,
        {},
        ADMIN_TOKEN,
      );
      expect(status).toBe(200);
      expect(body.errors).toBeUndefined();
      const day = (key: string, rail: string, requests: number, commission: bigint) => ({
        day: key,
        rail,
        requests: String(requests),
        commission: { picoUsd: commission.toString() },
        // Its one settlement was confirmed when the seed ran, not in 2030.
        settlements: 0,
        gasSpentWei: '0',
      });
      expect(body.data.operator.economics).toEqual([
        day('2030-01-01', 'session', 2, 375_000n * 3n),
        day('2030-01-02', 'session', 2, 375_000n * 7n),
        day('2030-01-02', 'x402', 1, 3_000_000n),
        day('2030-01-03', 'session', 1, 375_000n * 5n),
      ]);
      expect(body.data.operator.settlements.edges).toEqual([
        { node: { payer: bob, rail: 'x402', failureReason: 'transfer reverted' } },
      ]);
      // Bob's failed settlement released his record; Alice owes the one made after hers.
      expect(body.data.operator.topDebtors).toEqual([
        { wallet: bob, unpaid: { picoUsd: '33000000' }, proven: false },
        { wallet: alice, unpaid: { picoUsd: String(4_125_000 * 5) }, proven: true },
      ]);
    });

    test('its sums over every wallet count against the complexity limit', async () => {
      const { status, body } = await gql(
        aliases(10, 'operator { economics { day } exposure { unfinishedSettlements } }'),
        {},
        ADMIN_TOKEN,
      );
      expect(status).toBe(400);
      expect(codes(body)).toEqual(['QUERY_TOO_COMPLEX']);
      expect(body.errors[0].message).toMatch(/the operator's economics, exposure and topDebtors/);
    });

    test('a wallet cannot see it, even its own part', async () => {
      const { body } = await gql('{ operator { exposure { outstanding { usd } } } }', {}, aliceToken);
      expect(body.data).toBeNull();
      expect(codes(body)).toEqual(['FORBIDDEN']);
    });
  });

  describe('limits and errors', () => {
    test('first is at most 100 and cursors must be ours', async () => {
      const tooMany = await gql('{ usage(first: 101) { edges { cursor } } }', {}, aliceToken);
      expect(codes(tooMany.body)).toEqual(['BAD_USER_INPUT']);
      const negative = await gql('{ settlements(first: -1) { edges { cursor } } }', {}, aliceToken);
      expect(codes(negative.body)).toEqual(['BAD_USER_INPUT']);
      const cursor = await gql('{ usage(after: "garbage") { edges { cursor } } }', {}, aliceToken);
      expect(codes(cursor.body)).toEqual(['BAD_USER_INPUT']);
    });

    test('queries nested deeper than the limit are refused before running', async () => {
      const { status, body } = await gql(
        `{ usage { edges { node { settlement { records { edges { node { settlement { records { edges { cursor } } } } } } } } } } }`,
        {},
        aliceToken,
      );
      expect(status).toBe(400);
      expect(codes(body)).toEqual(['QUERY_TOO_DEEP']);
    });

    test('queries asking for too many nodes are refused before running', async () => {
      const page =
        'usage(first: 100) { edges { cursor node { requestId tokens { prompt completion } cost { total { usd picoUsd } } settlement { id status } } } }';
      // About 1,400 each: ten of them are above the limit of 10,000.
      const aliases = 'abcdefghij'.split('').map((alias) => `${alias}: ${page}`);
      const { status, body } = await gql(`{ ${aliases.join(' ')} }`, {}, aliceToken);
      expect(status).toBe(400);
      expect(codes(body)).toEqual(['QUERY_TOO_COMPLEX']);
      const viaVariables = await gql(
        'query ($n: Int) { settlements(first: $n) { edges { node { records(first: $n) { edges { cursor } } } } } }',
        { n: 100 },
        aliceToken,
      );
      expect(codes(viaVariables.body)).toEqual(['QUERY_TOO_COMPLEX']);
      const fine = await gql(`{ ${aliases.slice(0, 5).join(' ')} }`, {}, aliceToken);
      expect(fine.body.errors).toBeUndefined();
    });

    test('whole-history aggregates cost enough that fewer than ten fit in a request', async () => {
      for (const selection of [
        'spend(groupBy: DAY) { key }',
        'me { debt { owedAtomic } }',
        'me { totals { settlements } }',
      ]) {
        const { status, body } = await gql(aliases(10, selection), {}, aliceToken);
        expect(status).toBe(400);
        expect(codes(body)).toEqual(['QUERY_TOO_COMPLEX']);
        expect(body.errors[0].message).toMatch(/spend, debt and totals cost 1000 each/);
      }
      const fine = await gql(aliases(9, 'spend(groupBy: MODEL) { key }'), {}, aliceToken);
      expect(fine.body.errors).toBeUndefined();
    });

    test("the dashboard's queries pass, with the largest page a client may ask for", async () => {
      const { ACCOUNT_QUERY, SPEND_QUERY, USAGE_QUERY } = await dashboardQueries();
      for (const [query, variables] of [
        [ACCOUNT_QUERY, {}],
        [SPEND_QUERY, { from: '2030-01-01', to: '2030-01-04' }],
        [USAGE_QUERY, { first: 100 }],
      ] as const) {
        const { status, body } = await gql(query, variables, aliceToken);
        expect(status).toBe(200);
        expect(body.errors).toBeUndefined();
      }
    });

    test('a connection costs its database query however few items it asks for', async () => {
      // Settlement.records queries once per usage record: 24 of these ran 2,400 queries for 9,625 points.
      const perRecord = aliases(
        24,
        'usage(first: 100) { edges { node { settlement { records(first: 0) { pageInfo { hasNextPage } } } } } }',
      );
      const emptyPages = (count: number) => aliases(count, 'usage(first: 0) { pageInfo { hasNextPage } }');
      for (const query of [perRecord, emptyPages(101)]) {
        const { status, body } = await gql(query, {}, aliceToken);
        expect(status).toBe(400);
        expect(codes(body)).toEqual(['QUERY_TOO_COMPLEX']);
        expect(body.errors[0].message).toMatch(/a page 100 plus first times its fields/);
      }
      const fine = await gql(emptyPages(90), {}, aliceToken);
      expect(fine.body.errors).toBeUndefined();
    });

    test('only the operation that runs is limited, and its variables are checked even when none are sent', async () => {
      const document =
        'query A($n: Int!) { usage(first: $n) { edges { cursor } } } query B { me { wallet } }';
      for (const method of ['POST', 'GET'] as const) {
        const other = await send(method, { query: document, operationName: 'B' }, aliceToken);
        expect(other).toEqual({ status: 200, body: { data: { me: { wallet: alice } } } });
        // Without `variables`, mercurius has graphql-js check none: a missing one was QUERY_TOO_COMPLEX.
        const missing = await send(method, { query: document, operationName: 'A' }, aliceToken);
        expect(missing.status).toBe(400);
        expect(codes(missing.body)).toEqual(['BAD_USER_INPUT']);
        expect(missing.body.errors[0].message).toBe(
          'Variable "$n" of required type "Int!" was not provided.',
        );
      }
    });

    test('GET naming no operation it can run is refused as POST refuses it', async () => {
      const requests: Record<string, string>[] = [
        { query: 'query A { me { wallet } }', operationName: 'Nope' },
        { query: 'query A { me { wallet } } query B { me { wallet } }' },
      ];
      for (const params of requests) {
        const post = await send('POST', params, aliceToken);
        expect(post.status).toBe(400);
        expect(codes(post.body)).toEqual(['BAD_REQUEST']);
        // Twice: mercurius then has the document cached, and runs no validation hook for it.
        for (const get of [await send('GET', params, aliceToken), await send('GET', params, aliceToken)])
          expect(get).toEqual(post);
      }
    });

    test('impossible calendar dates are refused, not rolled over into the next month', async () => {
      for (const to of ['2030-04-31', '2030-02-30', '2030-02-29T12:00:00Z']) {
        const variable = await gql(
          'query ($to: DateTime) { usage(to: $to) { edges { cursor } } }',
          { to },
          aliceToken,
        );
        expect(variable.status).toBe(400);
        expect(codes(variable.body)).toEqual(['BAD_USER_INPUT']);
        expect(variable.body.errors[0].message).toMatch(/^Variable "\$to" got invalid value .* is not one$/);
        // A literal is checked with the document, as any malformed DateTime.
        const literal = await gql(`{ spend(groupBy: DAY, to: "${to}") { key } }`, {}, aliceToken);
        expect(literal.status).toBe(400);
        expect(codes(literal.body)).toEqual(['GRAPHQL_VALIDATION_FAILED']);
        expect(literal.body.errors[0].message).toContain(`${to.slice(0, 10)} is not one`);
      }
      const leapDay = await gql(usageQuery, { first: 1, to: '2028-02-29' }, aliceToken);
      expect(leapDay.body.errors).toBeUndefined();
    });

    test("graphql's standard introspection query passes: introspection is not held to the depth limit", async () => {
      const { status, body } = await gql(getIntrospectionQuery());
      expect(status).toBe(200);
      expect(body.errors).toBeUndefined();
      expect(body.data.__schema.queryType).toMatchObject({ name: 'Query' });
    });

    test('introspection stays bounded: its nested lists by validation, its copies by complexity', async () => {
      const nested = await gql(
        '{ __schema { types { fields { type { fields { type { fields { name } } } } } } } }',
      );
      expect(nested.status).toBe(400);
      expect(codes(nested.body)).toEqual(['GRAPHQL_VALIDATION_FAILED']);
      // Eight selections resolving 400 fields: the node limit let 200 copies through.
      const walk = '__schema { types { fields { type { ofType { ofType { fields { name } } } } } } }';
      const copies = await gql(aliases(10, walk));
      expect(copies.status).toBe(400);
      expect(codes(copies.body)).toEqual(['QUERY_TOO_COMPLEX']);
      const fine = await gql(aliases(9, walk));
      expect(fine.status).toBe(200);
      expect(fine.body.errors).toBeUndefined();
    });

    test('a NUL character in a filter or a cursor is BAD_USER_INPUT naming the argument', async () => {
      // PostgreSQL's text cannot hold NUL: it reached the database there and failed as an internal error.
      const cursor = Buffer.from(`${day(2).getTime()}:alice-2\0`).toString('base64url');
      for (const [query, variables, argument] of [
        ['{ usage(model: "x\\u0000") { edges { cursor } } }', {}, 'model'],
        ['query ($m: String) { usage(model: $m) { edges { cursor } } }', { m: 'x\0' }, 'model'],
        ['query ($a: String) { usage(after: $a) { edges { cursor } } }', { a: cursor }, 'after'],
        ['query ($a: String) { settlements(after: $a) { edges { cursor } } }', { a: cursor }, 'after'],
        [
          'query ($a: String) { settlements { edges { node { records(after: $a) { edges { cursor } } } } } }',
          { a: cursor },
          'after',
        ],
      ] as const) {
        const { body } = await gql(query, variables, aliceToken);
        expect(codes(body), query).toEqual(['BAD_USER_INPUT']);
        expect(body.errors[0].message, query).toMatch(new RegExp(`^${argument} `));
      }
    });

    test('bad queries get GraphQL errors with codes, never a 500', async () => {
      const syntax = await gql('{ me { wallet ', {}, aliceToken);
      expect(syntax.status).toBe(400);
      expect(codes(syntax.body)).toEqual(['GRAPHQL_PARSE_FAILED']);

      const unknownField = await gql('{ me { password } }', {}, aliceToken);
      expect(unknownField.status).toBe(400);
      expect(codes(unknownField.body)).toEqual(['GRAPHQL_VALIDATION_FAILED']);

      const badDate = await gql('{ usage(from: "yesterday") { edges { cursor } } }', {}, aliceToken);
      expect(badDate.status).toBe(400);
      expect(codes(badDate.body)).toEqual(['GRAPHQL_VALIDATION_FAILED']);

      const badVariable = await gql(
        'query ($from: DateTime) { usage(from: $from) { edges { cursor } } }',
        { from: 'soon' },
        aliceToken,
      );
      expect(badVariable.status).toBe(400);
      expect(codes(badVariable.body)).toEqual(['BAD_USER_INPUT']);

      const notJson = await app.inject({
        method: 'POST',
        url: '/graphql',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${aliceToken}` },
        payload: '{"query": ',
      });
      expect(notJson.statusCode).toBe(400);
      expect(notJson.json().errors[0].extensions.code).toBe('BAD_REQUEST');

      for (const payload of [
        { query: 'query A { me { wallet } }', operationName: 'B' },
        { query: 'query A { me { wallet } } query B { me { wallet } }' },
      ]) {
        const res = await app.inject({ method: 'POST', url: '/graphql', payload });
        expect(res.statusCode).toBe(400);
        expect(res.json().errors[0].extensions.code).toBe('BAD_REQUEST');
      }

      const noQuery = await app.inject({ method: 'POST', url: '/graphql', payload: {} });
      expect(noQuery.statusCode).toBeGreaterThanOrEqual(400);
      expect(noQuery.statusCode).toBeLessThan(500);
    });

    test('GET queries work, and the rest of the API keeps its envelope', async () => {
      const res = await app.inject({
        method: 'GET',
        url: `/graphql?query=${encodeURIComponent('{ me { wallet } }')}`,
        headers: { authorization: `Bearer ${aliceToken}` },
      });
      expect(res.statusCode).toBe(200);
      expect(res.json().data.me.wallet).toBe(alice);
      const missing = await app.inject({ method: 'GET', url: '/v1/nothing-here' });
      expect(missing.statusCode).toBe(404);
      expect(missing.json()).toMatchObject({ data: null, error: { code: 'not_found' } });
    });
  });
});

describe('query texts too long to parse and validate quickly', () => {
  let app: FastifyInstance;
  beforeAll(async () => {
    // A body limit far above GraphQL's own size limits: a query as long as a whole body reaches GraphQL.
    const limits = { bodyLimitBytes: 4 * 1024 * 1024 } as GatewayConfig['limits'];
    app = await buildApp(testConfig({ limits }), { checks: [] });
  });
  afterAll(() => app?.close());

  async function post(query: string) {
    const res = await app.inject({ method: 'POST', url: '/graphql', payload: { query } });
    return { status: res.statusCode, body: res.json() };
  }

  test('a query above 64 KiB is refused by its size before it is parsed, unauthenticated', async () => {
    // Nearly a whole body (4 MB) of aliases: parsed and validated, they held the event loop for seconds.
    const query = aliases(180_000, 'me { wallet }');
    const { status, body } = await post(query);
    expect(status).toBe(400);
    expect(body).toEqual({
      data: null,
      errors: [
        {
          message: `the query is ${Buffer.byteLength(query)} bytes long, above the limit of 65536; send a shorter query`,
          extensions: { code: 'QUERY_TOO_COMPLEX' },
        },
      ],
    });
  });

  test('the size limit counts bytes: 64 KiB is answered, a byte more is not', async () => {
    // Ends in a comment holding "é" (two bytes, one UTF-16 unit): one character shorter than its bytes.
    const ofBytes = (bytes: number) => `${'{ me { wallet } }'.padEnd(bytes - 3)}#é`;
    const fits = await post(ofBytes(64 * 1024));
    expect(fits.body.errors).toEqual([expect.objectContaining({ extensions: { code: 'UNAUTHENTICATED' } })]);
    const over = await post(ofBytes(64 * 1024 + 1));
    expect(over.status).toBe(400);
    expect(over.body.errors).toEqual([
      {
        message: 'the query is 65537 bytes long, above the limit of 65536; send a shorter query',
        extensions: { code: 'QUERY_TOO_COMPLEX' },
      },
    ]);
  });

  test('a query of more than 5,000 tokens is refused while parsing, before it is validated', async () => {
    // 1,250 same-named fields in 14 KiB: validating them against each other is quadratic.
    const { status, body } = await post(`{${' me { wallet }'.repeat(1_250)} }`);
    expect(status).toBe(400);
    expect(body).toEqual({
      data: null,
      errors: [
        {
          message: 'the query is longer than the limit of 5000 tokens; send a shorter query',
          extensions: { code: 'QUERY_TOO_COMPLEX' },
        },
      ],
    });
  });
});

/** What pg rejects with when every address of a dual-stack database host refuses (node 20 tries each). */
const refusedOnEveryAddress: KyselyPlugin = {
  transformQuery: ({ node }) => node,
  transformResult: async () => {
    const refused = (address: string) =>
      Object.assign(new Error(`connect ECONNREFUSED ${address}`), { code: 'ECONNREFUSED' });
    throw new AggregateError([refused('::1:5432'), refused('10.20.30.40:5432')]);
  },
};

test.each([
  ['closed', (store: Store) => store.close()],
  [
    'refusing on every address',
    (store: Store) => Object.assign(store, { db: store.db.withPlugin(refusedOnEveryAddress) }),
  ],
])('a failing database (%s) is an INTERNAL_SERVER_ERROR that does not leak its message', async (_, fail) => {
  const database = await createTestDatabase('sqlite');
  const store = await database.open();
  const app = await buildApp(testConfig({ adminToken: ADMIN_TOKEN }), { store });
  try {
    await fail(store);
    const res = await app.inject({
      method: 'POST',
      url: '/graphql',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      payload: { query: `{ me(wallet: "${alice}") { debt { owedAtomic } } }` },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().errors).toEqual([
      expect.objectContaining({ message: 'internal error', extensions: { code: 'INTERNAL_SERVER_ERROR' } }),
    ]);
    expect(res.body).not.toMatch(/ECONNREFUSED|10\.20\.30\.40/);
  } finally {
    await app.close();
    await database.drop();
  }
});
