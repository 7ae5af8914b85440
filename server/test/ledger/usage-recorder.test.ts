import { describe, expect, test } from 'vitest';
import { findUsageRecord } from '../../src/billing/ledger.js';
import { createUsageRecorder } from '../../src/billing/usage-recorder.js';
import type { Store } from '../../src/store/database.js';
import { testCatalog } from '../support/catalog.js';
import { testDialects, withTestStore } from '../support/db.js';

const usage = (inputTokens: number) => ({
  inputTokens,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  outputTokens: 1,
  reasoningTokens: 0,
  exact: true,
});

describe.each(testDialects)('the usage recorder on %s', (dialect) => {
  let store: Store;
  withTestStore(dialect, (opened) => {
    store = opened;
  });

  test('a record the ledger cannot hold fails alone: the others asked in the same turn are recorded', async () => {
    const model = testCatalog().find('anthropic/claude-opus-4.5')!;
    const recorder = createUsageRecorder(store, 1000);
    const record = (requestId: string, inputTokens: number) =>
      recorder.record({
        requestId: `${requestId}-${dialect}`,
        payer: '0x00000000000000000000000000000000000000d1',
        rail: 'session',
        model,
        usage: usage(inputTokens),
      });
    // Asked in one turn of the event loop: one batch. 2e12 prompt tokens cost more than a 64-bit integer holds.
    const outcomes = await Promise.allSettled([
      record('before', 10),
      record('absurd', 2_000_000_000_000),
      record('after', 20),
    ]);
    expect(outcomes.map((outcome) => outcome.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((outcomes[1] as PromiseRejectedResult).reason).toMatchObject({
      message: expect.stringContaining("more than the ledger's integers hold"),
    });
    expect(await findUsageRecord(store, `before-${dialect}`)).toMatchObject({ usage: { inputTokens: 10 } });
    expect(await findUsageRecord(store, `after-${dialect}`)).toMatchObject({ usage: { inputTokens: 20 } });
    expect(await findUsageRecord(store, `absurd-${dialect}`)).toBeUndefined();
  });
});
