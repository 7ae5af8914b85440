import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import { alive } from '../devkit/processes.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';
import { type Payer, SMALL_COST, SMALL_USAGE, useFaultStack } from './harness.js';
import { startTcpProxy, type TcpProxy, throughProxy } from './tcp-proxy.js';

// The gateway reaches PostgreSQL and Redis through proxies the test cuts, as a network failure or
// a restart of either server would; the test itself reads the ledger directly. Needs both servers:
// CI sets DATABASE_URL and REDIS_URL.
const databaseUrl = process.env.DATABASE_URL?.startsWith('postgres') ? process.env.DATABASE_URL : undefined;
const redisUrl = process.env.REDIS_URL;
const IN_FLIGHT_LIMIT = 3;
const QUERY_TIMEOUT_MS = 1_500;

describe.skipIf(!databaseUrl || !redisUrl)(
  'PostgreSQL (DATABASE_URL) and Redis (REDIS_URL) briefly unreachable',
  () => {
    let database: TestDatabase;
    let postgresProxy: TcpProxy;
    let redisProxy: TcpProxy;
    let redis: Redis;

    // Registered before the stack's hooks: set up before it, torn down after it.
    beforeAll(async () => {
      database = await createTestDatabase('postgres');
      const postgres = new URL(databaseUrl as string);
      const direct = new URL(redisUrl as string);
      [postgresProxy, redisProxy] = await Promise.all([
        startTcpProxy({ host: postgres.hostname, port: Number(postgres.port || 5432) }),
        startTcpProxy({ host: direct.hostname, port: Number(direct.port || 6379) }),
      ]);
      redis = new Redis(redisUrl as string);
    });
    afterAll(async () => {
      await Promise.all([postgresProxy?.close(), redisProxy?.close()]);
      redis?.disconnect();
      await database?.drop();
    });

    const stack = useFaultStack({
      databaseUrl: () => database.url,
      gatewayDatabaseUrl: () => throughProxy(database.url, postgresProxy),
      redisUrl: () => throughProxy(redisUrl as string, redisProxy),
      limits: { maxInFlightPerPayer: IN_FLIGHT_LIMIT, databaseQueryTimeoutMs: QUERY_TIMEOUT_MS },
    });

    /** Holds `IN_FLIGHT_LIMIT` requests at the provider, checks the next one is refused, lets them finish. */
    async function expectBoundHeld(payer: Payer) {
      const { probe } = stack;
      probe.hold();
      const held = Array.from({ length: IN_FLIGHT_LIMIT }, () => probe.chat(payer.client(), payer.address));
      await vi.waitFor(() => expect(probe.waiting()).toBe(IN_FLIGHT_LIMIT), { timeout: 10_000 });
      const beyond = await probe.chat(payer.client(), payer.address);
      const slots = await redis.zcard(`paygate-inflight:${payer.address}`);
      probe.release();
      expect(`${beyond.status} ${beyond.code}`).toBe('429 too_many_in_flight');
      expect((await Promise.all(held)).map((answer) => answer.status)).toEqual(
        Array(IN_FLIGHT_LIMIT).fill(200),
      );
      return { slots };
    }

    async function redisState(): Promise<string> {
      const res = await fetch(`${stack.gateway.url}/health`);
      const body = (await res.json()) as { data: { dependencies: { redis: { status: string } } } };
      return body.data.dependencies.redis.status;
    }

    test('Redis unreachable: requests are served, each instance bounds them alone; shared again once it is back', async () => {
      const payer = await stack.owingPayer(0);
      redisProxy.cut();
      try {
        await vi.waitFor(async () => expect(await redisState()).toBe('down'), { timeout: 5_000 });
        stack.anthropic.script({ text: 'paid', usage: SMALL_USAGE });
        const served = await stack.probe.chat(payer.client(), payer.address);
        expect(served.status).toBe(200);
        expect(served.headers.get('x-settlement-amount')).toBe(SMALL_COST.toString());
        // The bound still holds, counted in this process while Redis is away.
        expect(await expectBoundHeld(payer)).toEqual({ slots: 0 });
      } finally {
        redisProxy.restore();
      }
      await vi.waitFor(async () => expect(await redisState()).toBe('up'), { timeout: 10_000, interval: 100 });
      // Counted in Redis again, where every instance sees the slots.
      expect(await expectBoundHeld(payer)).toEqual({ slots: IN_FLIGHT_LIMIT });
      expect(stack.probe.violations).toEqual([]);
      await stack.expectLedgerMatchesChain([payer.address]);
    });

    test('PostgreSQL unreachable: requests are refused, never forwarded unpaid; the process survives and serves once it is back', async () => {
      const payer = await stack.owingPayer(1);
      await stack.refusedWhileCut(payer, postgresProxy, '503 service_unavailable');
      expect(alive(stack.gateway.pid)).toBe(true);
      await stack.servedPayingDebt(payer);
    });

    test('PostgreSQL silent (packets dropped, connections left open): requests are refused within DATABASE_QUERY_TIMEOUT_MS, and served on fresh connections once it is back', async () => {
      const payer = await stack.owingPayer(4);
      const started = performance.now();
      // Refused, not held for the 15 minutes TCP takes to give a silent connection up.
      await stack.refusedWhileCut(
        payer,
        { cut: () => postgresProxy.stall(), restore: () => postgresProxy.restore() },
        '503 service_unavailable',
      );
      // The client waits 5 s longer than the server's statement_timeout before it takes a connection for dead.
      expect(performance.now() - started).toBeLessThan(QUERY_TIMEOUT_MS + 10_000);
      expect(alive(stack.gateway.pid)).toBe(true);
      // The stalled connections stay silent for good: served at once on new ones.
      await stack.servedPayingDebt(payer);
    });

    test('PostgreSQL lost while the provider answers: the answer waits for its usage record, nothing is lost', async () => {
      const { probe, store } = stack;
      const payer = await stack.owingPayer(3);
      probe.hold();
      stack.anthropic.script({ text: 'answered during the outage', usage: SMALL_USAGE });
      const request = probe.chat(payer.client(), payer.address);
      await vi.waitFor(() => expect(probe.waiting()).toBe(1), { timeout: 10_000 });
      postgresProxy.cut();
      const refusedBefore = postgresProxy.refused();
      try {
        probe.release();
        // The gateway tried to write the record and found the database gone.
        await vi.waitFor(() => expect(postgresProxy.refused()).toBeGreaterThan(refusedBefore), {
          timeout: 10_000,
          interval: 10,
        });
      } finally {
        postgresProxy.restore();
      }
      const answer = await request;
      expect(answer.status).toBe(200);
      const record = await store.db
        .selectFrom('usage_records')
        .select('total_pico')
        .where('request_id', '=', answer.requestId as string)
        .executeTakeFirst();
      expect(record?.total_pico).toBe(answer.totalPicoUsd);
      expect(probe.violations).toEqual([]);
      await stack.expectLedgerMatchesChain([payer.address]);
    });

    test('PostgreSQL lost right after the settlement is broadcast: recorded once it is back, paid once', async () => {
      const { probe, rpc } = stack;
      const payer = await stack.owingPayer(2);
      const forwarded = probe.forwarded();
      // The chain holds its answers until the database is gone: the receipt arrives with nowhere to write it.
      const broadcast = rpc.stallAfter('eth_sendRawTransaction');
      const request = probe.chat(payer.client(), payer.address);
      await broadcast;
      postgresProxy.cut();
      rpc.pass();
      let refused: Awaited<typeof request>;
      try {
        refused = await request;
      } finally {
        postgresProxy.restore();
      }
      expect(`${refused.status} ${refused.code}`).toBe('503 service_unavailable');
      expect(probe.forwarded()).toBe(forwarded);
      expect(alive(stack.gateway.pid)).toBe(true);
      expect(await stack.settlementStates(payer.address)).toEqual([`sent ${SMALL_COST}`]);

      const served = await probe.chat(payer.client(), payer.address);
      expect(served.status).toBe(200);
      expect(served.headers.get('x-settlement-tx')).toBeNull();
      expect(await stack.settlementStates(payer.address)).toEqual([`confirmed ${SMALL_COST}`]);
      expect(probe.violations).toEqual([]);
      await stack.expectLedgerMatchesChain([payer.address]);
    });
  },
);
