import { parseGwei } from 'viem';
import { expect, test } from 'vitest';
import { replacementFees } from '../../src/payments/relayer.js';

// What the gateway pays to unstick a settlement: the market's fees, raised enough for nodes to
// accept the replacement, and nothing while the market asks no more than the transaction offers.
const offered = { maxFeePerGas: parseGwei('2'), maxPriorityFeePerGas: parseGwei('1') };

test('no replacement while the market asks no more than the transaction offers', () => {
  expect(replacementFees(offered, offered)).toBeNull();
  expect(
    replacementFees(offered, { maxFeePerGas: parseGwei('1.5'), maxPriorityFeePerGas: parseGwei('0.5') }),
  ).toBeNull();
});

test('a replacement offers the market fees when they are well above the old ones', () => {
  const market = { maxFeePerGas: parseGwei('50'), maxPriorityFeePerGas: parseGwei('3') };
  expect(replacementFees(offered, market)).toEqual(market);
});

test('a replacement raises both fees by at least an eighth (nodes refuse less than a tenth)', () => {
  expect(
    replacementFees(offered, { maxFeePerGas: parseGwei('2.1'), maxPriorityFeePerGas: parseGwei('1') }),
  ).toEqual({ maxFeePerGas: parseGwei('2.25') + 1n, maxPriorityFeePerGas: parseGwei('1.125') + 1n });
  // A transaction whose tip exceeds its max fee is invalid: the max fee rises to cover the tip.
  expect(
    replacementFees(offered, { maxFeePerGas: parseGwei('2'), maxPriorityFeePerGas: parseGwei('4') }),
  ).toEqual({ maxFeePerGas: parseGwei('4'), maxPriorityFeePerGas: parseGwei('4') });
});
