import { setTimeout as delay } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import type { Address } from 'viem';
import { hasPaid } from '../../billing/settlements.js';
import { GatewayError } from '../../errors.js';
import type { Store } from '../../store/database.js';

// A payer that never paid may be a fresh key made to be served once and never pay: a balance read
// races with the payer moving its funds. Each such payer is held to a small worst case, and all of
// them together to a ceiling per hour on what they were served; proven payers are not affected.

export interface UnprovenPolicy {
  /** UNPROVEN_PAYER_MAX_USD, in USDC atomic units: the most one unproven payer may owe and have in flight. */
  payerMaxAtomic: bigint;
  /** Whether the payer had a settlement that moved USDC confirmed (remembered once true). */
  isProven(payer: Address): Promise<boolean>;
  /**
   * Takes a request's worst case from this hour's ceiling (UNPROVEN_EXPOSURE_MAX_USD_PER_HOUR), or
   * throws 429 with `retry-after` until the next hour.
   */
  take(picoUsd: bigint): Promise<ExposureTaken>;
}

/** A request's share of the hour's ceiling, corrected once what it cost is known. */
export interface ExposureTaken {
  /** The request was served: its share becomes what it cost. */
  cost(picoUsd: bigint): void;
  /** Nothing was served: its share is given back (no-op after `cost`). */
  release(): void;
}

/** Where the hour's total lives: this process, or Redis shared by every instance. */
export interface HourlyCounter {
  /**
   * Adds `picoUsd` to the hour's total unless that passes `ceiling`: then undefined; else how to take
   * part of it off again (where it was counted).
   */
  add(hour: number, picoUsd: bigint, ceiling: bigint): Promise<((picoUsd: bigint) => void) | undefined>;
}

const HOUR_MS = 3_600_000;
const PROVEN_REMEMBERED = 100_000;

export function unprovenPolicy(options: {
  store: Store;
  payerMaxAtomic: bigint;
  hourlyCeilingPicoUsd: bigint;
  counter: HourlyCounter;
}): UnprovenPolicy {
  const proven = new Set<Address>();
  return {
    payerMaxAtomic: options.payerMaxAtomic,
    async isProven(payer) {
      if (proven.has(payer)) return true;
      if (!(await hasPaid(options.store, payer))) return false;
      if (proven.size >= PROVEN_REMEMBERED) proven.clear();
      proven.add(payer);
      return true;
    },
    async take(picoUsd) {
      const now = Date.now();
      const hour = Math.floor(now / HOUR_MS);
      const subtract = await options.counter.add(hour, picoUsd, options.hourlyCeilingPicoUsd);
      if (!subtract)
        throw new GatewayError(
          'rate_limited',
          'the gateway serves payers that have not paid before up to a limit per hour, reached now; retry later, or pay a debt first',
          {
            headers: { 'retry-after': String(Math.ceil(((hour + 1) * HOUR_MS - now) / 1000)) },
            details: { reason: 'unproven_exposure' },
          },
        );
      let share: bigint | undefined = picoUsd;
      return {
        cost(cost) {
          if (share === undefined) return;
          if (cost < share) subtract(share - cost);
          share = undefined;
        },
        release() {
          if (share !== undefined && share > 0n) subtract(share);
          share = undefined;
        },
      };
    },
  };
}

/** The hour's total in this process's memory. */
export function localHourlyCounter(): HourlyCounter {
  let current = { hour: 0, picoUsd: 0n };
  return {
    async add(hour, picoUsd, ceiling) {
      if (current.hour !== hour) current = { hour, picoUsd: 0n };
      if (current.picoUsd + picoUsd > ceiling) return undefined;
      current.picoUsd += picoUsd;
      const counted = current;
      return (part) => {
        counted.picoUsd -= part;
      };
    },
  };
}

// KEYS[1] the hour's total; ARGV amount, ceiling, ttl. Pico-USD totals stay far below 2^53 (9,007 USD
// in pico is 9e15), where Lua's doubles are exact.
const ADD = `local total = redis.call('INCRBY', KEYS[1], ARGV[1])
if total > tonumber(ARGV[2]) then
  redis.call('DECRBY', KEYS[1], ARGV[1])
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1`;

/**
 * The hour's total in Redis, shared by every instance. While Redis cannot be reached, each instance
 * counts on its own (the ceiling is then per instance), as the in-flight slots do.
 */
export function redisHourlyCounter(
  redis: Redis,
  options: { timeoutMs?: number; onStoreError?(error: unknown): void } = {},
): HourlyCounter {
  const { timeoutMs = 500, onStoreError } = options;
  const fallback = localHourlyCounter();
  return {
    async add(hour, picoUsd, ceiling) {
      const key = `paygate-unproven:${hour}`;
      let added: unknown;
      try {
        const answer = redis.eval(ADD, 1, key, picoUsd.toString(), ceiling.toString(), 2 * HOUR_MS);
        // Landing late, its share stays counted for the hour: cautious.
        answer.catch(() => undefined);
        added = await Promise.race([answer, delay(timeoutMs, 'late', { ref: false })]);
        if (added === 'late') throw new Error(`Redis did not answer within ${timeoutMs} ms`);
      } catch (error) {
        onStoreError?.(error);
        return fallback.add(hour, picoUsd, ceiling);
      }
      if (added !== 1) return undefined;
      return (part) => {
        redis.decrby(key, part.toString()).catch((error) => onStoreError?.(error));
      };
    },
  };
}
