import { type Address, encodeFunctionData, type Hex, multicall3Abi } from 'viem';
import type { ChainClient } from './chain-client.js';

/** Multicall3's canonical address, the same on Base and every chain it is deployed to. */
export const MULTICALL3_ADDRESS: Address = '0xcA11bde05977b3631167028862bE2a173976CA11';

/**
 * Multicall3's `aggregate3` of `calls`, each from Multicall3 itself. `allowFailure`: a call that
 * reverts fails alone, the others stand; else the whole transaction reverts with it.
 */
export function aggregate3Calldata(
  calls: ReadonlyArray<{ to: Address; data: Hex }>,
  allowFailure: boolean,
): Hex {
  return encodeFunctionData({
    abi: multicall3Abi,
    functionName: 'aggregate3',
    args: [calls.map(({ to, data }) => ({ target: to, allowFailure, callData: data }))],
  });
}

/**
 * Whether the chain has Multicall3 at its canonical address. A call to an address without code
 * "succeeds" doing nothing, so nothing is sent through it before this is known; asked until the
 * node answers, then remembered.
 */
export function multicall3Deployed(chain: Pick<ChainClient, 'publicClient'>): () => Promise<boolean> {
  let known: boolean | undefined;
  return async () => {
    known ??= await chain.publicClient.getCode({ address: MULTICALL3_ADDRESS }).then(
      (code) => code !== undefined && code !== '0x',
      () => undefined,
    );
    return known ?? false;
  };
}
