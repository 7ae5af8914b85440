import { createCaveatBuilder } from '@metamask/smart-accounts-kit/utils';
import type { Address, Hash } from 'viem';
import { describe, expect, test } from 'vitest';
import { type PayerAccount, usdcBalance } from '../../devkit/chain/index.js';
import { settlementsOf } from '../../src/billing/settlements.js';
import {
  authorizeSession,
  buildSessionDelegation,
  fetchTerms,
  type SessionTerms,
  signSessionDelegation,
  termsOfAccount,
} from '../../src/client/index.js';
import {
  authorize,
  chat,
  newPayer,
  openaiFor,
  SMALL,
  SMALL_COST_ATOMIC,
  useSessionGateway,
} from './harness.js';

// The client helper builds three caveats (amount cap, recipient pin, expiry). Sessions authorized with
// the five it built before (ValueLte first, Redeemer last) stay accepted and are settled as before.

const stack = useSessionGateway();

/** A session from the five-caveat delegation: ValueLte, the helper's three caveats, Redeemer naming the key. */
async function authorizeFiveCaveats(payer: PayerAccount) {
  const terms: SessionTerms = termsOfAccount(await fetchTerms(stack.gateway.url), payer.account);
  const three = buildSessionDelegation({
    terms,
    smartAccount: payer.account,
    cap: 5_000_000n,
    expiresAt: new Date(Date.now() + 86_400_000),
  });
  const delegation = {
    ...three,
    caveats: [
      ...createCaveatBuilder(terms.environment).addCaveat('valueLte', { maxValue: 0n }).build(),
      ...three.caveats,
      ...createCaveatBuilder(terms.environment)
        .addCaveat('redeemer', { redeemers: [terms.sessionKey] })
        .build(),
    ],
  };
  const signature = await signSessionDelegation(payer.account, delegation, terms);
  return authorizeSession({ gatewayUrl: stack.gateway.url, delegation, signature, chainId: terms.chainId });
}

/** Two paid requests: the second settles the first; the gas its settlement used. */
async function settledGas(token: string, payer: Address): Promise<bigint> {
  const client = openaiFor(stack.gateway, token);
  stack.anthropic.script({ text: 'first', usage: SMALL }, { text: 'second', usage: SMALL });
  await chat(client);
  const before = await usdcBalance(stack.local, stack.treasury);
  await chat(client);
  expect(await usdcBalance(stack.local, stack.treasury)).toBe(before + SMALL_COST_ATOMIC);
  const [settlement] = await settlementsOf(stack.gateway.store, payer, { limit: 1 });
  const receipt = await stack.local.publicClient.getTransactionReceipt({ hash: settlement?.txHash as Hash });
  expect(receipt.status).toBe('success');
  return receipt.gasUsed;
}

describe('a session authorized with the earlier five-caveat delegation', () => {
  test('is accepted with the same limits, and its debts are settled to the treasury, for more gas than the three-caveat set', async () => {
    const earlier = await newPayer(stack.local, 0);
    const session = await authorizeFiveCaveats(earlier);
    expect(session.limits).toMatchObject({
      token: stack.local.usdc,
      recipient: stack.treasury,
      totalCapAtomic: '5000000',
    });
    const earlierGas = await settledGas(session.token, earlier.address);

    const current = await newPayer(stack.local, 1);
    const currentGas = await settledGas((await authorize(stack.gateway, current)).token, current.address);

    // Both first settlements of their delegation: the two dropped caveats cost over 40k gas.
    expect(earlierGas - currentGas).toBeGreaterThan(40_000n);
  });
});
