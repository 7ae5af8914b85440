import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import pg from 'pg';
import { privateKeyToAddress } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import { GatewayError } from '../../src/errors.js';
import { statusOf } from '../../src/http/errors.js';
import { connectRateLimitStore } from '../../src/http/rate-limiting.js';
import type { InFlightSlot } from '../../src/payments/admission/in-flight.js';
import { redisInFlightLimiter } from '../../src/payments/admission/in-flight-redis.js';
import type { Store } from '../../src/store/database.js';
import { migrateToLatest } from '../../src/store/migrate.js';
import { ADVISORY_LOCK_ID } from '../../src/store/payer-lock.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';

const redisUrl = process.env.REDIS_URL;
const postgresUrl = process.env.DATABASE_URL?.startsWith('postgres') ? process.env.DATABASE_URL : undefined;

/** A payer of its own: no other suite shares its keys in Redis. */
const newPayer = () => privateKeyToAddress(`0x${randomBytes(32).toString('hex')}`);

/** 'slot' when taken, else the refusal's status and code. */
async function attempt(acquire: () => Promise<InFlightSlot>, held: InFlightSlot[]): Promise<string> {
  try {
    held.push(await acquire());
    return 'slot';
  } catch (error) {
    if (error instanceof GatewayError) return `${statusOf(error)} ${error.code}`;
    throw error;
  }
}

// Each limiter stands for one gateway instance with its own Redis connection.
describe.skipIf(!redisUrl)('in-flight slots in Redis (REDIS_URL)', () => {
  const connections: Redis[] = [];
  /** As the gateway does, commands start once the connection is ready (before, they fall back). */
  const connect = async () => {
    const redis = connectRateLimitStore(redisUrl as string);
    connections.push(redis);
    await once(redis, 'ready');
    return redis;
  };
  afterAll(() => {
    for (const redis of connections) redis.disconnect();
  });

  test('instances share one bound; a released slot is free for any of them', async () => {
    const [a, b] = (await Promise.all([connect(), connect()])).map((redis) =>
      redisInFlightLimiter(redis, { limit: 2 }),
    );
    const payer = newPayer();
    const held: InFlightSlot[] = [];
    expect(await attempt(() => a!.acquire(payer), held)).toBe('slot');
    expect(await attempt(() => b!.acquire(payer), held)).toBe('slot');
    expect(await attempt(() => a!.acquire(payer), held)).toBe('429 too_many_in_flight');
    expect(await attempt(() => b!.acquire(payer), held)).toBe('429 too_many_in_flight');
    // Another payer is bounded apart.
    expect(await attempt(() => b!.acquire(newPayer()), held)).toBe('slot');
    held[0]!.release();
    held[0]!.release();
    await vi.waitFor(async () => expect(await attempt(() => b!.acquire(payer), held)).toBe('slot'));
    for (const slot of held) slot.release();
  });

  test('each slot sees what the payer’s other slots, on any instance, reserve', async () => {
    const [a, b] = (await Promise.all([connect(), connect()])).map((redis) =>
      redisInFlightLimiter(redis, { limit: 3 }),
    );
    const payer = newPayer();
    const first = await a!.acquire(payer, 5_000_000_000_000n);
    const second = await b!.acquire(payer, 7n);
    expect([first.othersReservedPicoUsd, second.othersReservedPicoUsd]).toEqual([0n, 5_000_000_000_000n]);
    // Beyond a double's exact integers once summed: added as bigints.
    const third = await a!.acquire(payer, 9_007_199_254_740_993n);
    expect(third.othersReservedPicoUsd).toBe(5_000_000_000_007n);
    first.release();
    await vi.waitFor(async () => {
      const fourth = await b!.acquire(payer);
      fourth.release();
      expect(fourth.othersReservedPicoUsd).toBe(9_007_199_254_741_000n);
    });
    second.release();
    third.release();
  });

  test('a held slot outlives its time to live (refreshed); a dead instance’s slot expires', async () => {
    const slotTtlMs = 1_000;
    const living = redisInFlightLimiter(await connect(), { limit: 1, slotTtlMs });
    const dyingRedis = await connect();
    const dying = redisInFlightLimiter(dyingRedis, { limit: 1, slotTtlMs });
    const other = redisInFlightLimiter(await connect(), { limit: 1, slotTtlMs });
    const [kept, lost] = [newPayer(), newPayer()];
    const held: InFlightSlot[] = [];
    expect(await attempt(() => living.acquire(kept), held)).toBe('slot');
    expect(await attempt(() => dying.acquire(lost), held)).toBe('slot');
    // The instance dies without releasing: its connection is gone, nothing refreshes its slot.
    dyingRedis.disconnect();
    await sleep(2 * slotTtlMs);
    expect(await attempt(() => other.acquire(kept), held)).toBe('429 too_many_in_flight');
    expect(await attempt(() => other.acquire(lost), held)).toBe('slot');
    for (const slot of held) slot.release();
  });

  test('a slot Redis lost (restarted empty) while its request is in flight is counted again at the next refresh', async () => {
    const slotTtlMs = 600;
    const holder = redisInFlightLimiter(await connect(), { limit: 1, slotTtlMs });
    const other = redisInFlightLimiter(await connect(), { limit: 1, slotTtlMs });
    const payer = newPayer();
    const held: InFlightSlot[] = [];
    expect(await attempt(() => holder.acquire(payer), held)).toBe('slot');
    await (await connect()).del(`paygate-inflight:${payer}`);
    await sleep(slotTtlMs / 2);
    expect(await attempt(() => other.acquire(payer), held)).toBe('429 too_many_in_flight');
    for (const slot of held) slot.release();
  });

  test('a slot Redis took after the instance stopped waiting is given back (counted locally meanwhile)', async () => {
    const admin = await connect();
    const late = redisInFlightLimiter(await connect(), { limit: 1, timeoutMs: 50 });
    const other = redisInFlightLimiter(await connect(), { limit: 1 });
    const payer = newPayer();
    const held: InFlightSlot[] = [];
    // Redis holds every write for 200 ms: the acquisition lands after the instance stopped waiting.
    await admin.call('client', 'pause', '200', 'WRITE');
    expect(await attempt(() => late.acquire(payer), held)).toBe('slot');
    await sleep(400);
    expect(await admin.zcard(`paygate-inflight:${payer}`)).toBe(0);
    expect(await attempt(() => other.acquire(payer), held)).toBe('slot');
    for (const slot of held) slot.release();
  });

  test('while Redis stalls, a slot counted locally sees the instance’s slots in Redis, and the next one in Redis sees it', async () => {
    const admin = await connect();
    const limiter = redisInFlightLimiter(await connect(), { limit: 3, timeoutMs: 50 });
    const payer = newPayer();
    const inRedis = await limiter.acquire(payer, 5n);
    await admin.call('client', 'pause', '200', 'WRITE');
    const alone = await limiter.acquire(payer, 7n);
    expect(alone.othersReservedPicoUsd).toBe(5n);
    // Redis answers again (the late acquisition given back): it knows of one slot, this instance of two.
    await sleep(400);
    const next = await limiter.acquire(payer, 11n);
    expect(next.othersReservedPicoUsd).toBe(12n);
    for (const slot of [inRedis, alone, next]) slot.release();
  });

  test('Redis unreachable: each instance counts alone, and says why', async () => {
    const errors: unknown[] = [];
    // Nothing listens on port 9 (discard) on this host.
    const unreachable = connectRateLimitStore('redis://127.0.0.1:9');
    connections.push(unreachable);
    const alone = redisInFlightLimiter(unreachable, {
      limit: 2,
      onStoreError: (error) => errors.push(error),
    });
    const payer = newPayer();
    const held: InFlightSlot[] = [];
    expect(await attempt(() => alone.acquire(payer), held)).toBe('slot');
    expect(await attempt(() => alone.acquire(payer), held)).toBe('slot');
    expect(await attempt(() => alone.acquire(payer), held)).toBe('429 too_many_in_flight');
    held.pop()!.release();
    expect(await attempt(() => alone.acquire(payer), held)).toBe('slot');
    expect(errors.length).toBeGreaterThanOrEqual(3);
    for (const slot of held) slot.release();
  });
});

// Each store stands for one gateway instance; the schema is the deployment.
describe.skipIf(!postgresUrl)('leadership on PostgreSQL (DATABASE_URL)', () => {
  let database: TestDatabase;
  let elsewhere: TestDatabase;
  beforeAll(async () => {
    [database, elsewhere] = await Promise.all([
      createTestDatabase('postgres'),
      createTestDatabase('postgres'),
    ]);
  });
  afterAll(async () => {
    await Promise.all([database?.drop(), elsewhere?.drop()]);
  });

  test('instances starting together on a fresh schema migrate it once, whatever other schemas hold', async () => {
    // Another deployment's schema in the same database, with its own migration tables.
    await elsewhere.open();
    const fresh = await createTestDatabase('postgres');
    try {
      const [store] = await Promise.all([fresh.open(), fresh.open(), fresh.open(), fresh.open()]);
      expect(await migrateToLatest(store as Store)).toEqual([]);
    } finally {
      await fresh.drop();
    }
  });

  test('payer locks on every lock connection never starve the relayer lock taken inside them', {
    timeout: 10_000,
  }, async () => {
    const store = await database.open({ lockPoolSize: 2 });
    const payers = [newPayer(), newPayer(), newPayer()];
    // Each payer's settlement sends under the relayer's lock while holding its payer lock.
    const sent = await Promise.all(
      payers.map((payer) =>
        store.withPayerLock(payer, () => store.withLock('paygate:sender:relayer', async () => payer)),
      ),
    );
    expect(sent).toEqual(payers);
  });

  const leaders = (stores: Store[], name = 'collector') =>
    Promise.all(stores.map((store) => store.leadership(name).acquire()));

  test('one instance leads; when it gives up or loses its connection, another takes over', async () => {
    const instances = await Promise.all([database.open(), database.open(), database.open()]);
    const roles = instances.map((store) => store.leadership('collector'));
    const first = await Promise.all(roles.map((role) => role.acquire()));
    expect(first.filter(Boolean)).toHaveLength(1);
    const leader = first.indexOf(true);
    // Asking again keeps the same leader.
    expect(await Promise.all(roles.map((role) => role.acquire()))).toEqual(first);

    await roles[leader]!.release();
    const second = await Promise.all(roles.map((role, i) => (i === leader ? false : role.acquire())));
    expect(second.filter(Boolean)).toHaveLength(1);
    const next = second.indexOf(true);

    // The new leader's connection is killed (a network failure, a database restart): another
    // instance takes the role on its next attempt, and the old leader finds it has lost it.
    await terminateHolder(database.url, 'paygate:leader:collector');
    const others = [];
    for (const [i, role] of roles.entries()) if (i !== next) others.push(await role.acquire());
    expect(others.filter(Boolean)).toHaveLength(1);
    expect(await roles[next]!.acquire()).toBe(false);
    // Another role is another lock; another schema is another deployment.
    expect((await leaders(instances, 'other role')).filter(Boolean)).toHaveLength(1);
    expect(await leaders([await elsewhere.open()])).toEqual([true]);
  });
});

/**
 * Ends the database session holding the advisory lock of `key` in the schema of `url` (a bigint
 * advisory lock shows in pg_locks as its high and low 32 bits, objsubid 1).
 */
async function terminateHolder(url: string, key: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const holders = `from pg_locks l
     where l.locktype = 'advisory' and l.granted and l.objsubid = 1
       and l.classid::bigint = ((${ADVISORY_LOCK_ID} >> 32) & 4294967295)
       and l.objid::bigint = (${ADVISORY_LOCK_ID} & 4294967295)`;
  try {
    const { rowCount } = await client.query(`select pg_terminate_backend(l.pid) ${holders}`, [key]);
    expect(rowCount).toBe(1);
    // pg_terminate_backend only signals the backend: the lock is free once the backend has exited.
    await expect
      .poll(async () => (await client.query(`select 1 ${holders}`, [key])).rowCount, {
        timeout: 5_000,
        interval: 20,
      })
      .toBe(0);
  } finally {
    await client.end();
  }
}
