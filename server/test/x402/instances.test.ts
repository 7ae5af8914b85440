import { encodePaymentSignatureHeader } from '@x402/core/http';
import type { APIError } from 'openai';
import type { Address, Hash } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { describe, expect, test } from 'vitest';
import { mintUsdc, usdcBalance } from '../../devkit/chain/index.js';
import { settlementsOf } from '../../src/billing/settlements.js';
import { holdBlocks, queuedOnEach, releaseBlocks, settlementsSent } from '../support/batches.js';
import { chainGatewayConfig, useTwoInstancesOnPostgres } from '../support/chain-gateway.js';
import { testDialects } from '../support/db.js';
import {
  chat,
  chatBody,
  payerOwingSmallCost,
  payingClient,
  requiredOf,
  SMALL,
  SMALL_COST,
  settlementOf,
  signedInOpenai,
  type X402Stack,
} from './harness.js';

// Several gateway instances share one PostgreSQL database: a proof is accepted by one of them only.
// Only PostgreSQL serves several instances (SQLite is one process's file), so this runs when
// DATABASE_URL points at one, as CI sets it.
describe.skipIf(!testDialects.includes('postgres'))(
  'two gateway instances on one PostgreSQL database',
  () => {
    // Batches wait for the transaction before them however long a test holds the blocks.
    const stack = useTwoInstancesOnPostgres((local, anthropic, databaseUrl) =>
      chainGatewayConfig(local, anthropic, { databaseUrl, limits: { settlementBatchWaitMs: 120_000 } }),
    );

    /** The stack as one instance's clients see it. */
    const instance = (index: 0 | 1) =>
      ({ local: stack.local, anthropic: stack.anthropic, gateway: stack.instances[index] }) as X402Stack;

    /** A proof of `amount` signed by the stock client for the gateway's current requirements. */
    async function proof(payer: ReturnType<typeof privateKeyToAccount>, amount: bigint) {
      const asked = await fetch(`${stack.instances[0].url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(chatBody),
      });
      const required = requiredOf(asked.headers);
      const accepts = [{ ...required.accepts[0]!, amount: amount.toString() }];
      return encodePaymentSignatureHeader(
        await payingClient(stack.local, payer).createPaymentPayload({ ...required, accepts }),
      );
    }

    /** The same proof sent to both instances at once. */
    function race(header: string) {
      stack.anthropic.script({ text: 'the one forwarded', usage: SMALL });
      return Promise.all(
        stack.instances.map((gateway) =>
          fetch(`${gateway.url}/v1/chat/completions`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'PAYMENT-SIGNATURE': header },
            body: JSON.stringify(chatBody),
          }),
        ),
      );
    }

    test('a zero-value proof names its payer on one instance only', async () => {
      const payer = privateKeyToAccount(stack.local.accounts.payers[0]!.privateKey);
      // It holds USDC: a payer that holds none is refused before its proof is used.
      await mintUsdc(stack.local, payer.address, 1_000_000n);
      const answers = await race(await proof(payer, 0n));
      expect(answers.map((answer) => answer.status).sort()).toEqual([200, 402]);
      const refused = answers.find((answer) => answer.status === 402)!;
      expect(requiredOf(refused.headers).error).toMatch(/this payment proof was used before/);
    });

    test('a proof of the debt pays once: the other instance finds the debt paid and refuses it', async () => {
      const payer = privateKeyToAccount(stack.local.accounts.payers[1]!.privateKey);
      await mintUsdc(stack.local, payer.address, 1_000_000n);
      await chat(instance(0), payer);
      const before = await usdcBalance(stack.local, payer.address);
      const answers = await race(await proof(payer, SMALL_COST));
      expect(answers.map((answer) => answer.status).sort()).toEqual([200, 402]);
      expect(await usdcBalance(stack.local, payer.address)).toBe(before - SMALL_COST);
    });

    test('a payment identifier that paid on one instance is not paid or served again on the other', async () => {
      const payer = privateKeyToAccount(stack.local.accounts.payers[2]!.privateKey);
      await mintUsdc(stack.local, payer.address, 1_000_000n);
      const id = `pay_${crypto.randomUUID().replaceAll('-', '')}`;
      const calls = stack.anthropic.log.length;
      stack.anthropic.script({ text: 'served once', usage: SMALL });
      const first = await signedInOpenai(stack.instances[0].url, stack.local, payer, id)
        .openai.chat.completions.create(chatBody)
        .withResponse();
      const retried = await signedInOpenai(stack.instances[1].url, stack.local, payer, id)
        .openai.chat.completions.create(chatBody)
        .then(
          () => undefined,
          (error: unknown) => error as APIError,
        );
      expect(retried?.status).toBe(409);
      expect(retried?.error).toMatchObject({
        details: { requestId: first.response.headers.get('x-request-id'), outcome: 'served' },
      });
      expect(stack.anthropic.log.length - calls).toBe(1);
    });

    test('each instance batches its own x402 payers: every payer paid exactly once, one transaction per instance', async () => {
      const { local } = stack;
      const owing = (index: 0 | 1) => payerOwingSmallCost(instance(index));
      const starters = [await owing(0), await owing(1)];
      const batched = [
        [await owing(0), await owing(0), await owing(0)],
        [await owing(1), await owing(1), await owing(1)],
      ];
      const payers = batched.flat();
      const everyone = [...starters, ...payers];
      const balances = await Promise.all(everyone.map((payer) => usdcBalance(local, payer.address)));
      const treasury = local.accounts.treasury.address;
      const before = await usdcBalance(local, treasury);
      const sent = (waiting: Array<{ address: Address }>) =>
        settlementsSent(
          stack.instances[0].store,
          waiting.map((payer) => payer.address),
        );

      await holdBlocks(local);
      let answers: Awaited<ReturnType<typeof chat>>[];
      try {
        // Each instance's starter waits in the pool; the others fall due behind them.
        const first = starters.map((starter, index) => chat(instance(index as 0 | 1), starter));
        await sent(starters);
        const due = Promise.all(
          batched.flatMap((group, index) => group.map((payer) => chat(instance(index as 0 | 1), payer))),
        );
        // Each is opened and simulated alone, then joins its instance's queue.
        await queuedOnEach(stack.instances, 'x402', 3);
        await local.testClient.mine({ blocks: 1 });
        await sent(payers);
        await releaseBlocks(local);
        await Promise.all(first);
        answers = await due;
      } finally {
        await local.testClient.setAutomine(true);
      }

      // One transaction per instance, carrying that instance's payers, under distinct nonces.
      const hashes = batched.map(
        (group) =>
          new Set(group.map((payer) => settlementOf(answers[payers.indexOf(payer)]!.headers).transaction)),
      );
      expect(hashes.map((group) => group.size)).toEqual([1, 1]);
      const batchHashes = hashes.map((group) => [...group][0] as Hash);
      expect(batchHashes[0]).not.toBe(batchHashes[1]);
      for (const [index, group] of batched.entries()) {
        const receipt = await local.publicClient.getTransactionReceipt({ hash: batchHashes[index]! });
        expect(receipt.status).toBe('success');
        for (const payer of group) {
          const settlements = await settlementsOf(stack.instances[0].store, payer.address);
          expect(
            settlements.map(({ status, amountAtomic, txHash }) => `${status} ${amountAtomic} ${txHash}`),
          ).toEqual([`confirmed ${SMALL_COST} ${receipt.transactionHash}`]);
        }
      }
      // Each payer's debt, and each starter's, moved to the treasury once.
      expect(await usdcBalance(local, treasury)).toBe(before + 8n * SMALL_COST);
      for (const [index, payer] of everyone.entries())
        expect(await usdcBalance(local, payer.address)).toBe(balances[index]! - SMALL_COST);
    });
  },
);
