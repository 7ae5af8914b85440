import type { Address, Hash } from 'viem';
import { describe, expect, test } from 'vitest';
import { usdcBalance } from '../../devkit/chain/index.js';
import { settlementsOf } from '../../src/billing/settlements.js';
import { queuedOnEach, settlementsSent } from '../support/batches.js';
import { useTwoInstancesOnPostgres } from '../support/chain-gateway.js';
import { testDialects } from '../support/db.js';
import {
  authorize,
  chat,
  newPayer,
  openaiFor,
  SMALL,
  SMALL_COST_ATOMIC,
  sessionGatewayConfig,
} from './harness.js';

// Several gateway instances share one PostgreSQL database and one session key: the payer lock is the
// database's, and the key's sends are serialized across instances by another advisory lock. Only
// PostgreSQL serves several instances (SQLite is one process's file), so this runs when DATABASE_URL
// points at one, as CI sets it.
describe.skipIf(!testDialects.includes('postgres'))(
  'two gateway instances on one PostgreSQL database',
  () => {
    // Batches wait for the transaction before them however long a test holds the blocks.
    const stack = useTwoInstancesOnPostgres((local, anthropic, databaseUrl) =>
      sessionGatewayConfig(local, anthropic, { databaseUrl, limits: { settlementBatchWaitMs: 120_000 } }),
    );

    const treasuryBalance = () => usdcBalance(stack.local, stack.local.accounts.treasury.address as Address);

    test('one payer sending to both instances at once settles its debt once', async () => {
      const payer = await newPayer(stack.local, 0);
      const session = await authorize(stack.instances[0], payer);
      stack.anthropic.script({ text: 'debt', usage: SMALL });
      await chat(openaiFor(stack.instances[0], session.token));
      const before = await treasuryBalance();

      // Slow answers: neither request's own cost is recorded before the other is admitted.
      stack.anthropic.script(
        { text: 'a', usage: SMALL, delayMs: 300 },
        { text: 'b', usage: SMALL, delayMs: 300 },
      );
      const answers = await Promise.all(
        stack.instances.map((gateway) => chat(openaiFor(gateway, session.token))),
      );
      expect(answers.map((answer) => answer.status)).toEqual([200, 200]);
      expect(answers.filter((answer) => answer.headers.get('x-settlement-tx') !== null)).toHaveLength(1);
      const settlements = await settlementsOf(stack.instances[1].store, payer.address);
      expect(settlements.map((settlement) => settlement.status)).toEqual(['confirmed']);
      expect(await treasuryBalance()).toBe(before + SMALL_COST_ATOMIC);
    });

    test('payers settling through both instances at once are all paid, though the instances share the key', async () => {
      const payers = await Promise.all([1, 2, 3, 4].map((owner) => newPayer(stack.local, owner)));
      const sessions = await Promise.all(payers.map((payer) => authorize(stack.instances[0], payer)));
      stack.anthropic.script(...sessions.map(() => ({ text: 'debt', usage: SMALL })));
      for (const session of sessions) await chat(openaiFor(stack.instances[0], session.token));
      const before = await treasuryBalance();

      stack.anthropic.script(...sessions.map(() => ({ text: 'next', usage: SMALL })));
      const answers = await Promise.all(
        sessions.map((session, index) => chat(openaiFor(stack.instances[index % 2]!, session.token))),
      );
      expect(answers.map((answer) => answer.headers.get('x-settlement-amount'))).toEqual(
        sessions.map(() => SMALL_COST_ATOMIC.toString()),
      );
      expect(await treasuryBalance()).toBe(before + BigInt(sessions.length) * SMALL_COST_ATOMIC);
    });

    test('each instance batches its own payers: every payer paid exactly once, one transaction per instance', async () => {
      const { local } = stack;
      const owing = async (owner: number, salt: number, instance: 0 | 1) => {
        const payer = await newPayer(local, owner, { salt });
        const gateway = stack.instances[instance];
        const session = await authorize(gateway, payer);
        stack.anthropic.script({ text: 'debt', usage: SMALL });
        await chat(openaiFor(gateway, session.token));
        return { address: payer.address, client: openaiFor(gateway, session.token) };
      };
      const starters = [await owing(5, 20, 0), await owing(6, 20, 1)];
      const batched = [
        [await owing(0, 21, 0), await owing(1, 21, 0), await owing(2, 21, 0)],
        [await owing(3, 21, 1), await owing(4, 21, 1), await owing(5, 21, 1)],
      ];
      const payers = batched.flat();
      const before = await treasuryBalance();
      const sent = (waiting: Array<{ address: Address }>) =>
        settlementsSent(
          stack.instances[0].store,
          waiting.map((payer) => payer.address),
        );

      await local.testClient.setAutomine(false);
      await local.testClient.setIntervalMining({ interval: 0 });
      let answers: Awaited<ReturnType<typeof chat>>[];
      try {
        // Each instance's starter waits in the pool; the others fall due behind them.
        stack.anthropic.script(...[...starters, ...payers].map(() => ({ text: 'next', usage: SMALL })));
        const first = starters.map((starter) => chat(starter.client));
        await sent(starters);
        const due = Promise.all(payers.map((payer) => chat(payer.client)));
        // Each is opened and simulated alone, then joins its instance's queue.
        await queuedOnEach(stack.instances, 'session', 3);
        await local.testClient.mine({ blocks: 1 });
        await sent(payers);
        await local.testClient.setAutomine(true);
        await local.testClient.mine({ blocks: 1 });
        expect((await Promise.all(first)).map((answer) => answer.status)).toEqual([200, 200]);
        answers = await due;
      } finally {
        await local.testClient.setAutomine(true);
      }

      expect(answers.map((answer) => answer.headers.get('x-settlement-amount'))).toEqual(
        payers.map(() => SMALL_COST_ATOMIC.toString()),
      );
      // One transaction per instance, carrying that instance's payers, under distinct nonces.
      const hashes = batched.map(
        (group) =>
          new Set(group.map((payer) => answers[payers.indexOf(payer)]?.headers.get('x-settlement-tx'))),
      );
      expect(hashes.map((group) => group.size)).toEqual([1, 1]);
      const [hashA, hashB] = hashes.map((group) => [...group][0] as Hash);
      expect(hashA).not.toBe(hashB);
      for (const payer of payers) {
        const settlements = await settlementsOf(stack.instances[1].store, payer.address);
        expect(settlements.map((settlement) => `${settlement.status} ${settlement.amountAtomic}`)).toEqual([
          `confirmed ${SMALL_COST_ATOMIC}`,
        ]);
      }
      expect(await treasuryBalance()).toBe(before + 8n * SMALL_COST_ATOMIC);
    });
  },
);
