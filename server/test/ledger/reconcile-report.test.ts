import { describe, expect, test } from 'vitest';
import {
  formatReconciliation,
  type LedgerReconciliation,
} from '../../src/payments/outbox/reconcile-ledger.js';

const checked = (count: number): LedgerReconciliation['checked'] => ({
  payers: count,
  settlements: count,
  confirmedTransfers: count,
  chainTransfers: count,
  fromBlock: 1n,
  toBlock: 20n,
});

const mismatch = (n: number) => ({ kind: 'amount_differs' as const, message: `settlement ${n} differs` });

describe("the reconciliation report's counts", () => {
  test.each([
    [1, '1 payer, 1 settlement (1 confirmed transfer checked), 1 transfer'],
    [2, '2 payers, 2 settlements (2 confirmed transfers checked), 2 transfers'],
    [0, '0 payers, 0 settlements (0 confirmed transfers checked), 0 transfers'],
  ])('a matching ledger, %d of each', (count, scope) => {
    expect(
      formatReconciliation({ consistent: true, mismatches: [], noted: [], checked: checked(count) }),
    ).toBe(`The ledger matches the chain: ${scope} to the treasury in blocks 1-20.`);
  });

  test.each([
    ['1 mismatch', 1],
    ['2 mismatches', 2],
  ])('a ledger that does not match: (%s)', (mismatches, count) => {
    const found = Array.from({ length: count }, (_, i) => mismatch(i + 1));
    expect(
      formatReconciliation({ consistent: false, mismatches: found, noted: [], checked: checked(1) }),
    ).toBe(
      [
        `The ledger does not match the chain (${mismatches}): 1 payer, 1 settlement (1 confirmed transfer checked), 1 transfer to the treasury in blocks 1-20.`,
        ...found.map(({ message }) => `- [amount_differs] ${message}`),
      ].join('\n'),
    );
  });
});
