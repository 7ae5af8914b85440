import type { Address, Hash } from 'viem';
import type { PrivateKeyAccount } from 'viem/accounts';
import { beforeAll, describe, expect, test, vi } from 'vitest';
import { mintUsdc, usdcBalance } from '../../devkit/chain/index.js';
import { debtOf, recordUsage } from '../../src/billing/ledger.js';
import { settlementsOf } from '../../src/billing/settlements.js';
import { transferAuthorization } from '../chain/authorizations.js';
import type { RpcProxy } from '../faults/rpc-proxy.js';
import { completedRequest } from '../support/usage-entries.js';
import {
  authorizationOf,
  chat,
  landTransfer,
  payerOwingSmallCost,
  proofFor,
  SMALL_COST,
  sendProof,
  settlementOf,
  useX402Stack,
} from './harness.js';

// The node fails while the gateway settles a proof in process, before anything is sent for it: the
// payer is told to retry (503), never that its proof was refused, and is not held once the node
// answers again. The gateway reaches the chain through a proxy that fails its calls at the step a
// test aims at; the test's own transactions go to the chain directly. The collector runs every
// 0.2 s and finishes settlements untouched for a second.
const stack = useX402Stack({
  rpcProxy: true,
  limits: { collectorIntervalMs: 200, settlementTimeoutMs: 1_000 },
});
let rpc: RpcProxy;
let treasury: Address;

beforeAll(() => {
  rpc = stack.rpc!;
  treasury = stack.local.accounts.treasury.address;
});

const treasuryBalance = () => usdcBalance(stack.local, treasury);

/** A 503 the payer may retry shortly: its error. */
async function expectRetryLater(response: Response): Promise<{ details?: unknown }> {
  expect(response.status).toBe(503);
  expect(response.headers.get('retry-after')).toBe('3');
  const { error } = await response.json();
  expect(error.code).toBe('payments_unavailable');
  return error;
}

/**
 * Sends the proof of the payer's debt, held as its transaction would be prepared (its gas
 * estimated); runs `meanwhile`, then the facilitator refuses it (nothing sent) and the node fails
 * as the gateway asks whether anyone used its authorization.
 */
async function refusedWhileTheNodeFails(
  payer: PrivateKeyAccount,
  meanwhile: (header: string) => Promise<unknown>,
): Promise<Response> {
  const header = await proofFor(stack, payer, SMALL_COST);
  const held = rpc.stallFrom('eth_estimateGas');
  const answer = sendProof(stack, 'PAYMENT-SIGNATURE', header);
  await held;
  try {
    await meanwhile(header);
    const failing = rpc.downFrom('eth_getBlockByNumber');
    rpc.pass();
    const response = await answer;
    await failing;
    return response;
  } finally {
    rpc.pass();
  }
}

/** The payer's balance moves away: its transfer's gas estimate reverts, and the facilitator refuses it. */
async function drain(payer: PrivateKeyAccount): Promise<bigint> {
  const funds = await usdcBalance(stack.local, payer.address);
  await landTransfer(
    stack.local,
    payer,
    transferAuthorization(payer.address, stack.local.accounts.deployer.address, funds),
  );
  return funds;
}

describe('the node fails as the settlement of a proof is prepared', () => {
  // Once the node says that nothing was paid, the 503 states what the payer owes (its next proof's amount).
  test.each<[string, () => Promise<void>, unknown]>([
    [
      'errs once',
      () => rpc.misreportNext('eth_estimateGas', 'internal error'),
      { owedAtomic: SMALL_COST.toString() },
    ],
    // Down for the rest of the request: whether anyone used the authorization cannot be read either.
    ['goes down', () => rpc.downFrom('eth_estimateGas'), undefined],
  ])(
    '%s: 503 with retry-after, not a refused proof; then the next proof pays the debt once',
    async (_, fail, details) => {
      const payer = await payerOwingSmallCost(stack);
      const before = await treasuryBalance();
      const forwarded = stack.anthropic.log.length;
      const header = await proofFor(stack, payer, SMALL_COST);
      const failed = fail();
      try {
        const response = await sendProof(stack, 'PAYMENT-SIGNATURE', header);
        await failed;
        expect((await expectRetryLater(response)).details).toEqual(details);
      } finally {
        rpc.pass();
      }
      expect(stack.anthropic.log.length).toBe(forwarded);

      const { exchanges } = await chat(stack, payer);
      expect(exchanges.map((e) => e.status)).toEqual([402, 402, 200]);
      const settlements = await settlementsOf(stack.gateway.store, payer.address);
      expect(settlements.map((s) => s.status)).toEqual(['confirmed', 'failed']);
      expect(settlements[1]!.failureReason).toMatch(/^the payment could not be settled: node_unavailable: /);
      expect(await treasuryBalance()).toBe(before + SMALL_COST);
    },
  );

  test('errs once after another request of the payer completed: the 503 states the debt as it refuses', async () => {
    const payer = await payerOwingSmallCost(stack);
    const header = await proofFor(stack, payer, SMALL_COST);
    const held = rpc.stallFrom('eth_estimateGas');
    const answer = sendProof(stack, 'PAYMENT-SIGNATURE', header);
    try {
      await held;
      // The proof's settlement claimed the debt read before it; this request's cost is owed besides.
      await recordUsage(stack.gateway.store, completedRequest(payer.address, 7_000_000n, { rail: 'x402' }));
      const failed = rpc.misreportNext('eth_estimateGas', 'internal error');
      rpc.pass();
      const response = await answer;
      await failed;
      expect((await expectRetryLater(response)).details).toEqual({
        owedAtomic: (SMALL_COST + 7n).toString(),
      });
    } finally {
      rpc.pass();
    }
  });
});

describe('a proof the facilitator refuses while the node cannot say whether its authorization was used', () => {
  test('503 with retry-after; once the node answers, the next request fails it and the next proof pays once', async () => {
    const payer = await payerOwingSmallCost(stack);
    const before = await treasuryBalance();
    let funds = 0n;
    const response = await refusedWhileTheNodeFails(payer, async () => {
      funds = await drain(payer);
    });
    await expectRetryLater(response);
    await mintUsdc(stack.local, payer.address, funds);

    // Not held until the proof's authorization expires (2 minutes).
    const { exchanges } = await chat(stack, payer);
    expect(exchanges.map((e) => e.status)).toEqual([402, 402, 200]);
    const [paid, refused] = await settlementsOf(stack.gateway.store, payer.address);
    expect(paid).toMatchObject({ status: 'confirmed', amountAtomic: SMALL_COST });
    expect(refused).toMatchObject({
      status: 'failed',
      failureReason: expect.stringMatching(/^the payment could not be settled: /),
    });
    expect(await treasuryBalance()).toBe(before + SMALL_COST);
  });

  test('whose payer does not come back: the collector fails it once the node answers, the debt is owed again', async () => {
    const payer = await payerOwingSmallCost(stack);
    const response = await refusedWhileTheNodeFails(payer, () => drain(payer));
    await expectRetryLater(response);

    await vi.waitFor(
      async () => {
        const [finished] = await settlementsOf(stack.gateway.store, payer.address);
        expect(finished).toMatchObject({ status: 'failed' });
      },
      { timeout: 10_000, interval: 100 },
    );
    expect((await debtOf(stack.gateway.store, payer.address)).owedAtomic).toBe(SMALL_COST);
  });

  test('because someone else landed it: once the node answers, it is confirmed by that transaction, never paid twice', async () => {
    const payer = await payerOwingSmallCost(stack);
    const before = await treasuryBalance();
    let landed: Hash | undefined;
    const response = await refusedWhileTheNodeFails(payer, async (header) => {
      landed = await landTransfer(stack.local, payer, authorizationOf(header));
    });
    await expectRetryLater(response);

    const { headers, exchanges } = await chat(stack, payer);
    expect(exchanges.map((e) => e.status)).toEqual([402, 200]);
    expect(settlementOf(headers)).toMatchObject({ success: true, transaction: '' });
    const settlements = await settlementsOf(stack.gateway.store, payer.address);
    expect(settlements.map((s) => [s.status, s.txHash])).toEqual([['confirmed', landed]]);
    expect(await treasuryBalance()).toBe(before + SMALL_COST);
  });
});
