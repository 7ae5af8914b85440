import type { Address } from 'viem';
import { describe, expect, test } from 'vitest';
import { usdcBalance } from '../../devkit/chain/index.js';
import { settlementsOf } from '../../src/billing/settlements.js';
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
    const stack = useTwoInstancesOnPostgres((local, anthropic, databaseUrl) =>
      sessionGatewayConfig(local, anthropic, { databaseUrl }),
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
  },
);
