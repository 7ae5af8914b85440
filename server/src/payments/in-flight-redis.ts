import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { type InFlightLimiter, localInFlightLimiter, tooManyInFlight } from './in-flight.js';

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
// instances' clocks never matter. Expired slots are dropped before counting.
const NOW_MS = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`;

/** KEYS[1] the payer's slots; ARGV slot id, limit, ttl. 1 when the slot is taken, 0 when the payer is at its limit. */
const ACQUIRE = `${NOW_MS}
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1`;

/**
 * KEYS[1] the payer's slots; ARGV slot id, ttl. A slot that expired meanwhile (Redis was out longer
 * than the TTL, or restarted empty) is added back: its request is still in flight and must count.
 */
const REFRESH = `${NOW_MS}
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1`;

/**
 * The in-flight bound shared by every gateway instance through Redis. While Redis cannot be
 * reached, each instance bounds its payers on its own (the bound is then the limit per instance)
 * rather than refusing paying callers.
 */
export function redisInFlightLimiter(redis: Redis, options: RedisInFlightOptions): InFlightLimiter {
  const slotTtlMs = options.slotTtlMs ?? DEFAULT_SLOT_TTL_MS;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const fallback = localInFlightLimiter(options.limit);
  const storeError = (error: unknown) => options.onStoreError?.(error);
  /** Slot id -> the payer's key, for every slot this process holds in Redis. */
  const held = new Map<string, string>();
  let refresher: NodeJS.Timeout | undefined;

  const refresh = () => {
    const pipeline = redis.pipeline();
    for (const [slot, key] of held) pipeline.eval(REFRESH, 1, key, slot, slotTtlMs);
    pipeline.exec().catch(storeError);
  };

  const take = async (key: string, slot: string): Promise<boolean> => {
    const answer = redis.eval(ACQUIRE, 1, key, slot, options.limit, slotTtlMs);
    const late = delay(timeoutMs, 'late' as const, { ref: false });
    const result = await Promise.race([answer, late]);
    if (result === 'late') {
      // If it lands after all, the slot it took is given back: this request is counted locally.
      answer
        .then(
          (taken) => (taken === 1 ? redis.zrem(key, slot) : undefined),
          () => undefined,
        )
        .catch(() => undefined);
      throw new Error(`Redis did not answer within ${timeoutMs} ms`);
    }
    return result === 1;
  };

  return {
    async acquire(payer) {
      const key = `paygate-inflight:${payer}`;
      const slot = randomUUID();
      let taken: boolean;
      try {
        taken = await take(key, slot);
      } catch (error) {
        storeError(error);
        return fallback.acquire(payer);
      }
      if (!taken) throw tooManyInFlight(options.limit);
      held.set(slot, key);
      refresher ??= setInterval(refresh, slotTtlMs / 3).unref();
      let released = false;
      return () => {
        if (released) return;
        released = true;
        held.delete(slot);
        if (held.size === 0) {
          clearInterval(refresher);
          refresher = undefined;
        }
        // When this fails the slot is no longer refreshed and expires.
        redis.zrem(key, slot).catch(storeError);
      };
    },
  };
}
