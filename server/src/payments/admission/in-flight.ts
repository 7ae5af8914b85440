import type { Address } from 'viem';
import { GatewayError } from '../../errors.js';

/** One request's in-flight slot, and what the payer's other requests in flight reserved when it was taken. */
export interface InFlightSlot {
  /**
   * The sum of the reservations (pico-USD) held by the payer's other slots when this one was taken.
   * Of any requests in flight at once, the one that took its slot last saw every other's.
   */
  othersReservedPicoUsd: bigint;
  /** Lowers the slot's reservation (once its request's worst case is known to be less). */
  lower(reservePicoUsd: bigint): Promise<void>;
  /** Gives the slot and its reservation back (once). */
  release(): void;
}

/**
 * Bounds the requests of one payer in flight at once, and so its unsettled exposure. Each slot may
 * reserve an amount (the most its request can cost), for the payer's cap to count requests not
 * completed yet.
 */
export interface InFlightLimiter {
  /** Takes a slot reserving `reservePicoUsd` (0 by default), or throws 429 `too_many_in_flight`. */
  acquire(payer: Address, reservePicoUsd?: bigint): Promise<InFlightSlot>;
}

export function tooManyInFlight(limit: number): GatewayError {
  return new GatewayError(
    'too_many_in_flight',
    `at most ${limit} requests of one payer may be in flight at once; retry when one completes`,
    { headers: { 'retry-after': '1' } },
  );
}

interface PayerSlots {
  count: number;
  reservedPicoUsd: bigint;
}

/** A limiter in this process's memory, which tells what its slots of a payer reserve. */
export interface LocalInFlightLimiter extends InFlightLimiter {
  reservedPicoUsd(payer: Address): bigint;
}

/** One gateway process: a counter and a reserved sum per payer in memory. */
export function localInFlightLimiter(limit: number): LocalInFlightLimiter {
  const slots = new Map<Address, PayerSlots>();
  return {
    reservedPicoUsd: (payer) => slots.get(payer)?.reservedPicoUsd ?? 0n,
    async acquire(payer, reservePicoUsd = 0n) {
      const held = slots.get(payer) ?? { count: 0, reservedPicoUsd: 0n };
      if (held.count >= limit) throw tooManyInFlight(limit);
      const othersReservedPicoUsd = held.reservedPicoUsd;
      held.count += 1;
      held.reservedPicoUsd += reservePicoUsd;
      slots.set(payer, held);
      let released = false;
      return {
        othersReservedPicoUsd,
        async lower(lowered) {
          if (released || lowered >= reservePicoUsd) return;
          held.reservedPicoUsd -= reservePicoUsd - lowered;
          reservePicoUsd = lowered;
        },
        release() {
          if (released) return;
          released = true;
          held.count -= 1;
          held.reservedPicoUsd -= reservePicoUsd;
          if (held.count === 0) slots.delete(payer);
        },
      };
    },
  };
}
