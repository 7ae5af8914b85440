import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import {
  type InFlightLimiter,
  type InFlightSlot,
  localInFlightLimiter,
  tooManyInFlight,
} from './in-flight.js';

export interface RedisInFlightOptions {
  /** Requests of one payer in flight at once, over every instance sharing the Redis. */
  limit: number;
  /**
   * How long a slot outlives its last refresh (held slots are refreshed every third of it): the
   * slots of an instance that died are free again after this.
   */
  slotTtlMs?: number;
  /** Longest wait for Redis before this instance counts the slot on its own. */
  timeoutMs?: number;
  /** Redis could not be reached: the slot was counted in this process only. */
  onStoreError?(error: unknown): void;
}

const DEFAULT_SLOT_TTL_MS = 30_000;
const DEFAULT_TIMEOUT_MS = 500;

// A payer's slots are a sorted set of slot ids scored by their expiry on Redis's own clock, so the
// instances' clocks never matter. Expired slots are dropped before counting. A slot's id ends with
// what it reserves (`<uuid>:<pico-USD>`), summed here rather than in Lua, whose numbers are doubles.
const NOW_MS = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`;

/**
 * KEYS[1] the payer's slots; ARGV slot id, limit, ttl. The ids of the payer's other slots when the
 * slot is taken (an array), nil when the payer is at its limit.
 */
const ACQUIRE = `${NOW_MS}
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local others = redis.call('ZRANGE', KEYS[1], 0, -1)
if #others >= tonumber(ARGV[2]) then return false end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return others`;

/**
 * KEYS[1] the payer's slots; ARGV slot id, ttl. A slot that expired meanwhile (Redis was out longer
 * than the TTL, or restarted empty) is added back: its request is still in flight and must count.
 */
const REFRESH = `${NOW_MS}
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1`;

/** KEYS[1] the payer's slots; ARGV the slot's id, its new id: the slot, renamed, keeps its expiry. */
const RENAME = `local expiry = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not expiry then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[1], expiry, ARGV[2])
return 1`;

/**
 * The in-flight bound shared by every gateway instance through Redis. While Redis cannot be
 * reached, each instance bounds its payers on its own (the bound is then the limit per instance)
 * rather than refusing paying callers. Either way a slot sees the reservations of every slot of
 * the payer this instance holds, in Redis or counted alone; while Redis is away, not those of the
 * other instances.
 */
export function redisInFlightLimiter(redis: Redis, options: RedisInFlightOptions): InFlightLimiter {
  const slotTtlMs = options.slotTtlMs ?? DEFAULT_SLOT_TTL_MS;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const fallback = localInFlightLimiter(options.limit);
  const storeError = (error: unknown) => options.onStoreError?.(error);
  /** Slot id -> the payer's key, for every slot this process holds in Redis. */
  const held = new Map<string, string>();
  let refresher: NodeJS.Timeout | undefined;

  /** What this instance's slots of the payer's `key` in Redis reserve. */
  const heldInRedis = (key: string) => {
    let sum = 0n;
    for (const [slot, slotKey] of held) if (slotKey === key) sum += reservationOf(slot);
    return sum;
  };

  const refresh = () => {
    const pipeline = redis.pipeline();
    for (const [slot, key] of held) pipeline.eval(REFRESH, 1, key, slot, slotTtlMs);
    pipeline.exec().catch(storeError);
  };

  /** The ids of the payer's other slots once this one is taken; null when the payer is at its limit. */
  const take = async (key: string, slot: string): Promise<string[] | null> => {
    const answer = redis.eval(ACQUIRE, 1, key, slot, options.limit, slotTtlMs) as Promise<string[] | null>;
    const late = delay(timeoutMs, 'late' as const, { ref: false });
    const result = await Promise.race([answer, late]);
    if (result === 'late') {
      // If it lands after all, the slot it took is given back: this request is counted locally.
      answer
        .then(
          (others) => (others ? redis.zrem(key, slot) : undefined),
          () => undefined,
        )
        .catch(() => undefined);
      throw new Error(`Redis did not answer within ${timeoutMs} ms`);
    }
    return result;
  };

  return {
    async acquire(payer, reservePicoUsd = 0n): Promise<InFlightSlot> {
      const key = `paygate-inflight:${payer}`;
      const id = randomUUID();
      let slot = `${id}:${reservePicoUsd}`;
      let others: string[] | null;
      try {
        others = await take(key, slot);
      } catch (error) {
        storeError(error);
        const alone = await fallback.acquire(payer, reservePicoUsd);
        return { ...alone, othersReservedPicoUsd: alone.othersReservedPicoUsd + heldInRedis(key) };
      }
      if (!others) throw tooManyInFlight(options.limit);
      held.set(slot, key);
      refresher ??= setInterval(refresh, slotTtlMs / 3).unref();
      let released = false;
      return {
        othersReservedPicoUsd:
          others.reduce((sum, other) => sum + reservationOf(other), 0n) + fallback.reservedPicoUsd(payer),
        async lower(lowered) {
          if (released || lowered >= reservationOf(slot)) return;
          const renamed = `${id}:${lowered}`;
          // Until Redis answers, the others see the higher reservation: cautious. Not renamed (Redis
          // away), the slot keeps it until released.
          await redis.eval(RENAME, 1, key, slot, renamed).then(() => {
            held.delete(slot);
            slot = renamed;
            if (released) redis.zrem(key, renamed).catch(storeError);
            else held.set(renamed, key);
          }, storeError);
        },
        release() {
          if (released) return;
          released = true;
          held.delete(slot);
          if (held.size === 0) {
            clearInterval(refresher);
            refresher = undefined;
          }
          // When this fails the slot is no longer refreshed and expires.
          redis.zrem(key, slot).catch(storeError);
        },
      };
    },
  };
}

/** What a slot id reserves; 0 for an id without one (a slot of an instance before reservations). */
function reservationOf(slotId: string): bigint {
  const amount = slotId.slice(slotId.lastIndexOf(':') + 1);
  return /^\d+$/.test(amount) ? BigInt(amount) : 0n;
}
