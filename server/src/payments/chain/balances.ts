import { type Address, erc20Abi } from 'viem';
import type { ChainClient } from './chain-client.js';

/** A payer's USDC balance (atomic units), read from the chain at most once per `maxAgeMs`. */
export interface BalanceReader {
  /** `fresh`: read now, as after a settlement that moved the payer's USDC. */
  usdcOf(payer: Address, options?: { fresh?: boolean }): Promise<bigint>;
}

/** `account`'s USDC balance (atomic units), read from the chain now. */
export function usdcBalanceOf(
  chain: Pick<ChainClient, 'publicClient' | 'usdc'>,
  account: Address,
): Promise<bigint> {
  return chain.publicClient.readContract({
    address: chain.usdc,
    abi: erc20Abi,
    functionName: 'balanceOf',
    args: [account],
  });
}

// Enough for every payer active within a block; beyond it the oldest entry is read again.
const CACHED_BALANCES = 10_000;

/**
 * Balances cached for at most a block (`maxAgeMs`): a payer moving its funds within it is what the
 * bound on unproven payers and the exposure budget's other limits cover.
 */
export function balanceReader(
  chain: Pick<ChainClient, 'publicClient' | 'usdc'>,
  maxAgeMs: number,
): BalanceReader {
  const cache = new Map<Address, { atomic: Promise<bigint>; readAt: number }>();
  return {
    usdcOf(payer, options = {}) {
      const now = Date.now();
      const known = cache.get(payer);
      if (known && !options.fresh && now - known.readAt < maxAgeMs) return known.atomic;
      const atomic = usdcBalanceOf(chain, payer);
      cache.delete(payer);
      const oldest = cache.keys().next();
      if (cache.size >= CACHED_BALANCES && !oldest.done) cache.delete(oldest.value);
      cache.set(payer, { atomic, readAt: now });
      // A failed read is not remembered.
      atomic.catch(() => {
        if (cache.get(payer)?.atomic === atomic) cache.delete(payer);
      });
      return atomic;
    },
  };
}
