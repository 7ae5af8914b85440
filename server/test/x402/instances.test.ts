import { encodePaymentSignatureHeader } from '@x402/core/http';
import type { APIError } from 'openai';
import { privateKeyToAccount } from 'viem/accounts';
import { describe, expect, test } from 'vitest';
import { mintUsdc, usdcBalance } from '../../devkit/chain/index.js';
import { chainGatewayConfig, useTwoInstancesOnPostgres } from '../support/chain-gateway.js';
import { testDialects } from '../support/db.js';
import {
  chat,
  chatBody,
  payingClient,
  requiredOf,
  SMALL,
  SMALL_COST,
  signedInOpenai,
  type X402Stack,
} from './harness.js';

// Several gateway instances share one PostgreSQL database: a proof is accepted by one of them only.
// Only PostgreSQL serves several instances (SQLite is one process's file), so this runs when
// DATABASE_URL points at one, as CI sets it.
describe.skipIf(!testDialects.includes('postgres'))(
  'two gateway instances on one PostgreSQL database',
  () => {
    const stack = useTwoInstancesOnPostgres((local, anthropic, databaseUrl) =>
      chainGatewayConfig(local, anthropic, { databaseUrl }),
    );

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
      await chat(
        { local: stack.local, anthropic: stack.anthropic, gateway: stack.instances[0] } as X402Stack,
        payer,
      );
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
  },
);
