import type { Address } from 'viem';
import { ApiError } from '../http/errors.js';

/** Bounds the requests of one payer in flight at once, and so its unsettled exposure. */
export interface InFlightLimiter {
  /** Takes a slot or throws 429 `too_many_in_flight`; the returned function gives it back (once). */
  acquire(payer: Address): Promise<() => void>;
}

export function tooManyInFlight(limit: number): ApiError {
  return new ApiError(
    429,
    'too_many_in_flight',
    `at most ${limit} requests of one payer may be in flight at once; retry when one completes`,
    { headers: { 'retry-after': '1' } },
  );
}

/** One gateway process: a counter per payer in memory. */
export function localInFlightLimiter(limit: number): InFlightLimiter {
  const counts = new Map<Address, number>();
  return {
    async acquire(payer) {
      const count = counts.get(payer) ?? 0;
      if (count >= limit) throw tooManyInFlight(limit);
      counts.set(payer, count + 1);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        const left = (counts.get(payer) ?? 1) - 1;
        if (left === 0) counts.delete(payer);
        else counts.set(payer, left);
      };
    },
  };
}
