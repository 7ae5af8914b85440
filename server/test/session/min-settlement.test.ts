import { describe, expect, test } from 'vitest';
import { debtOf } from '../../src/billing/ledger.js';
import { authorize, chat, newPayer, openaiFor, useSessionGateway } from './harness.js';

// MIN_SETTLEMENT_USD: an operator may carry a session payer's debts below an amount instead of paying
// gas to settle each before the next request; within the exposure budget all the same.

const stack = useSessionGateway({
  // 0.001 USD: 1,000 atomic units.
  config: (config) => ({ ...config, exposure: { ...config.exposure, minSettlementPicoUsd: 1_000_000_000n } }),
});

/** 100 input and 20 output tokens of Sonnet plus 10%: 660 atomic units. */
const USAGE = { input_tokens: 100, output_tokens: 20 };

describe('with MIN_SETTLEMENT_USD', () => {
  test('a debt below it is carried; once it reaches it, the next request settles all of it first', async () => {
    const payer = await newPayer(stack.local, 0);
    const client = openaiFor(stack.gateway, (await authorize(stack.gateway, payer)).token);
    stack.anthropic.script(...Array.from({ length: 3 }, () => ({ text: 'ok', usage: USAGE })));

    expect((await chat(client)).headers.get('x-settlement-tx')).toBeNull();
    // 660 owed, below 1,000: carried, served without a settlement.
    const carried = await chat(client);
    expect(carried.status).toBe(200);
    expect(carried.headers.get('x-settlement-tx')).toBeNull();
    expect((await debtOf(stack.gateway.store, payer.address)).owedAtomic).toBe(1_320n);
    // 1,320 owed: settled before the third is forwarded.
    const settling = await chat(client);
    expect(settling.headers.get('x-settlement-amount')).toBe('1320');
    expect((await debtOf(stack.gateway.store, payer.address)).owedAtomic).toBe(660n);
  });

  test('a carried debt still counts against the cap', async () => {
    const payer = await newPayer(stack.local, 1);
    // 2,000 units: one request (at most ~1,470) fits, and then not beside the 660 carried.
    const client = openaiFor(stack.gateway, (await authorize(stack.gateway, payer, { cap: 2_000n })).token);
    stack.anthropic.script({ text: 'ok', usage: USAGE });
    expect((await chat(client)).status).toBe(200);
    await expect(chat(client)).rejects.toMatchObject({
      status: 402,
      error: { details: { reason: 'cap_reached', owedAtomic: '660' } },
    });
  });
});
