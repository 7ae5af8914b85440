import { expect, test } from 'vitest';
import { onSecondLook } from '../../src/payments/chain/relayer.js';

/** A chain whose last two blocks are `blockSeconds` apart, polled every 10 ms. */
function chainWithBlocksEvery(blockSeconds: number) {
  return {
    pollingInterval: 10,
    getBlock: async (args?: { blockNumber?: bigint }) =>
      args?.blockNumber === undefined
        ? { number: 100n, timestamp: 1_000n + BigInt(blockSeconds) }
        : { number: args.blockNumber, timestamp: 1_000n },
  } as unknown as Parameters<typeof onSecondLook>[0];
}

test('a look that found nothing is asked again a block later, not merely two polling intervals', async () => {
  const answers = [null, 'receipt'];
  const started = performance.now();
  const found = await onSecondLook(chainWithBlocksEvery(2), async () => answers.shift() ?? null);
  expect(found).toBe('receipt');
  // Base's 2 s blocks: a node one block behind has caught up by then.
  expect(performance.now() - started).toBeGreaterThanOrEqual(1_990);
});

test('a look that found something is not asked again', async () => {
  let looks = 0;
  const found = await onSecondLook(chainWithBlocksEvery(2), async () => {
    looks++;
    return 'receipt';
  });
  expect(found).toBe('receipt');
  expect(looks).toBe(1);
});
