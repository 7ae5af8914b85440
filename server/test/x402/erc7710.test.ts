import { createDelegation, ScopeType } from '@metamask/smart-accounts-kit';
import { encodeDelegations } from '@metamask/smart-accounts-kit/utils';
import { x402Erc7710Client, type x402PaymentRequirements } from '@metamask/x402';
import { x402Client } from '@x402/core/client';
import { type Address, getAddress, type Hex } from 'viem';
import { generatePrivateKey } from 'viem/accounts';
import { describe, expect, test } from 'vitest';
import { createPayerAccount, type PayerAccount, usdcBalance } from '../../devkit/chain/index.js';
import { debtOf } from '../../src/billing/ledger.js';
import { settlementsOf } from '../../src/billing/settlements.js';
import { GAS_CAPS } from '../../src/payments/chain/gas-caps.js';
import {
  chatBody,
  LARGER,
  LARGER_COST,
  type openaiClient,
  paymentsOf,
  refused,
  requiredOf,
  requirementsAsked,
  SMALL,
  SMALL_COST,
  sendProof,
  signedInOpenaiPaying,
  useX402Stack,
} from './harness.js';

const stack = useX402Stack();
const treasury = () => stack.local.accounts.treasury.address;

/** A MetaMask smart account (HybridDeleGator) holding 10 USDC: it pays by delegation, from its own balance. */
function smartPayer(): Promise<PayerAccount> {
  return createPayerAccount(stack.local, generatePrivateKey(), { fundUsdc: 10_000_000n });
}

/**
 * What a MetaMask smart account's x402 delegation provider hands `@metamask/x402`: a delegation to the
 * facilitator the requirements name, for the amount asked (the kit's smallest cap, 1 unit, for "0"),
 * until the proof times out, redeemable by that facilitator only.
 */
function delegationProvider(payer: PayerAccount) {
  return async (requirements: x402PaymentRequirements) => {
    const [facilitator] = (requirements.extra?.facilitatorAddresses ?? []) as Address[];
    const amount = BigInt(requirements.amount);
    const delegation = createDelegation({
      environment: stack.local.environment,
      from: payer.address,
      to: facilitator!,
      scope: {
        type: ScopeType.Erc20TransferAmount,
        tokenAddress: requirements.asset as Address,
        maxAmount: amount > 0n ? amount : 1n,
      },
      caveats: [
        {
          type: 'timestamp',
          afterThreshold: 0,
          beforeThreshold: Math.floor(Date.now() / 1000) + requirements.maxTimeoutSeconds,
        },
        { type: 'redeemer', redeemers: [facilitator!] },
      ],
    });
    const signed = { ...delegation, signature: await payer.account.signDelegation({ delegation }) };
    return {
      delegationManager: stack.local.environment.DelegationManager as Hex,
      permissionContext: encodeDelegations([signed]),
      delegator: payer.address as Hex,
    };
  };
}

/**
 * The official client paying with `@metamask/x402`'s ERC-7710 client, wrapped once around the sign-in
 * extension's fetch (so the 402 it pays states the debt); only the requirement paid by delegation is
 * chosen. Every exchange is recorded.
 */
function delegatingOpenai(payer: PayerAccount, options: { paymentId?: string } = {}) {
  const signer = {
    address: payer.address,
    signMessage: ({ message }: { message: string }) => payer.account.signMessage({ message }),
  };
  const client = new x402Client();
  const network = `eip155:${stack.local.chainId}` as const;
  client.register(network, new x402Erc7710Client({ delegationProvider: delegationProvider(payer) }));
  client.registerPolicy((_, requirements) =>
    requirements.filter((requirement) => requirement.extra?.assetTransferMethod === 'erc7710'),
  );
  client.setSpendControls({ allowedAssets: [{ network, asset: stack.local.usdc }] });
  return signedInOpenaiPaying(stack.gateway.url, client, signer, options.paymentId);
}

async function completion(openai: ReturnType<typeof openaiClient>, usage = SMALL) {
  stack.anthropic.script({ text: 'hi there', usage });
  return openai.chat.completions.create(chatBody).withResponse();
}

describe('exact with an ERC-7710 delegation', () => {
  test('the 402 offers exact by delegation, redeemable by the gateway’s relayer', async () => {
    const required = await requirementsAsked(stack);
    expect(required.accepts.find((accept) => accept.extra?.assetTransferMethod === 'erc7710')).toMatchObject({
      scheme: 'exact',
      amount: '0',
      asset: stack.local.usdc,
      payTo: treasury(),
      extra: { facilitatorAddresses: [stack.local.accounts.gateway.address] },
    });
  });

  test('three requests in a row by @metamask/x402 wrapped once: each pays the debt before it, from the smart account', async () => {
    const payer = await smartPayer();
    const { openai, exchanges } = delegatingOpenai(payer);
    const [payerBefore, treasuryBefore] = [
      await usdcBalance(stack.local, payer.address),
      await usdcBalance(stack.local, treasury()),
    ];

    for (const usage of [SMALL, LARGER, SMALL]) {
      const { data } = await completion(openai, usage);
      expect(data.choices[0]?.message.content).toBe('hi there');
    }

    // The first names the payer (a delegation for 0, verified, nothing moved); each later one pays the one before.
    expect(await paymentsOf(stack, payer.address)).toEqual([SMALL_COST, LARGER_COST]);
    const moved = SMALL_COST + LARGER_COST;
    expect(payerBefore - (await usdcBalance(stack.local, payer.address))).toBe(moved);
    expect((await usdcBalance(stack.local, treasury())) - treasuryBefore).toBe(moved);
    expect((await debtOf(stack.gateway.store, payer.address)).owedAtomic).toBe(SMALL_COST);
    const settlements = await settlementsOf(stack.gateway.store, payer.address, { limit: 10 });
    expect(settlements.map((s) => [s.status, s.amountAtomic]).reverse()).toEqual([
      ['confirmed', SMALL_COST],
      ['confirmed', LARGER_COST],
    ]);
    // Redeemed by the gateway's relayer, within the cap on a delegation's settlement.
    for (const settlement of settlements)
      expect(settlement.gasUsed).toBeLessThan(GAS_CAPS.x402DelegationSettlement);
    // Every proof went out after a signed-in 402: bare, signed in, paid.
    expect(exchanges.map((exchange) => exchange.status)).toEqual([
      402, 402, 200, 402, 402, 200, 402, 402, 200,
    ]);
  });

  test('a replayed delegation proof is refused and charges nothing twice', async () => {
    const payer = await smartPayer();
    const { openai, exchanges } = delegatingOpenai(payer);
    await completion(openai, SMALL);
    await completion(openai, SMALL);
    const paidProof = exchanges[5]!.headers.get('PAYMENT-SIGNATURE');
    expect(paidProof).toBeTruthy();
    const calls = stack.anthropic.log.length;

    const replayed = await sendProof(stack, 'PAYMENT-SIGNATURE', paidProof!);

    expect(replayed.status).toBe(402);
    expect(requiredOf(replayed.headers).error).toContain('used before');
    expect(stack.anthropic.log.length).toBe(calls);
    expect(await paymentsOf(stack, payer.address)).toEqual([SMALL_COST]);
  });

  test('a retried payment identifier is neither paid nor served again', async () => {
    const payer = await smartPayer();
    await completion(delegatingOpenai(payer).openai, SMALL);
    const id = `pay_${crypto.randomUUID().replaceAll('-', '')}`;
    const { openai } = delegatingOpenai(payer, { paymentId: id });
    const calls = stack.anthropic.log.length;

    const first = await completion(openai, LARGER);
    const retried = await refused(openai.chat.completions.create(chatBody));

    expect(retried.status).toBe(409);
    expect(retried.error).toMatchObject({
      code: 'payment_identifier_used',
      details: {
        paymentIdentifier: id,
        requestId: first.response.headers.get('x-request-id'),
        outcome: 'served',
      },
    });
    expect(stack.anthropic.log.length - calls).toBe(1);
    expect(await paymentsOf(stack, payer.address)).toEqual([SMALL_COST]);
    expect((await debtOf(stack.gateway.store, payer.address)).owedAtomic).toBe(LARGER_COST);
  });

  test('a delegation whose caveat is not one of the framework’s enforcers is refused before anything is sent', async () => {
    const payer = await smartPayer();
    const stranger = getAddress(stack.local.usdc);
    const provider = delegationProvider(payer);
    const required = await requirementsAsked(stack);
    const requirement = required.accepts.find((accept) => accept.extra?.assetTransferMethod === 'erc7710')!;
    const honest = await provider(requirement as x402PaymentRequirements);
    // The payer's own contract as a caveat: it would run in every redemption, at the relayer's gas.
    const { decodeDelegations } = await import('@metamask/smart-accounts-kit/utils');
    const [delegation] = decodeDelegations(honest.permissionContext);
    const tampered = {
      ...delegation!,
      caveats: [...delegation!.caveats, { enforcer: stranger, terms: '0x' as Hex, args: '0x' as Hex }],
    };
    const unsigned = { ...tampered, signature: '0x' as Hex };
    const signature = await payer.account.signDelegation({ delegation: unsigned });
    const { encodePaymentSignatureHeader } = await import('@x402/core/http');
    const header = encodePaymentSignatureHeader({
      x402Version: 2,
      resource: required.resource,
      accepted: requirement,
      payload: { ...honest, permissionContext: encodeDelegations([{ ...tampered, signature }]) },
    });
    const nonce = await stack.local.publicClient.getTransactionCount({
      address: stack.local.accounts.gateway.address,
    });

    const response = await sendProof(stack, 'PAYMENT-SIGNATURE', header);

    expect(response.status).toBe(402);
    expect(requiredOf(response.headers).error).toContain('unsupported_caveat');
    expect(
      await stack.local.publicClient.getTransactionCount({ address: stack.local.accounts.gateway.address }),
    ).toBe(nonce);
  });
});
