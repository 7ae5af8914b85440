import type { PrivateKeyAccount } from 'viem/accounts';
import { describe, expect, test, vi } from 'vitest';
import { testUsdcAbi, usdcBalance } from '../../devkit/chain/index.js';
import { debtOf } from '../../src/billing/ledger.js';
import {
  markSettlementSent,
  openSettlement,
  type Settlement,
  settlementsOf,
} from '../../src/billing/settlements.js';
import { recordAuthorization } from '../../src/payments/x402/authorizations.js';
import {
  signTransferAuthorization,
  splitSignature,
  type TransferAuthorization,
  transferAuthorization,
} from '../chain/authorizations.js';
import { reconcileWithChain } from '../support/ledger-checks.js';
import { chat, fundedEoa, SMALL_COST, settlementOf, useX402Stack } from './harness.js';

// A gateway that crashed while settling leaves an x402 settlement pending; the payer's next
// request finishes it from what the chain says about the proof's authorization, or the collector
// does when the payer does not come back.

// The collector runs every 0.2 s and finishes settlements untouched for a second.
const stack = useX402Stack({ limits: { collectorIntervalMs: 200, settlementTimeoutMs: 1_000 } });

async function payerOwingSmallCost(index: number): Promise<PrivateKeyAccount> {
  const payer = await fundedEoa(stack, index, 1_000_000n);
  await chat(stack, payer);
  expect((await debtOf(stack.gateway.store, payer.address)).owedAtomic).toBe(SMALL_COST);
  return payer;
}

/**
 * What the gateway had written when it crashed: the settlement opened and the proof's authorization
 * recorded against it, nothing more.
 */
async function crashedSettlement(payer: PrivateKeyAccount, validBefore: bigint) {
  const { local } = stack;
  const fromBlock = await local.publicClient.getBlockNumber();
  const settlement = (await openSettlement(stack.gateway.store, payer.address, 'x402')) as Settlement;
  const authorization = {
    ...transferAuthorization(payer.address, local.accounts.treasury.address, settlement.amountAtomic),
    validBefore,
  };
  await recordAuthorization(stack.gateway.store, {
    asset: local.usdc,
    payer: payer.address,
    nonce: authorization.nonce,
    valueAtomic: authorization.value,
    validBefore,
    settlementId: settlement.id,
    fromBlock,
  });
  return { settlement, authorization };
}

/** The facilitator's transaction, which reached the chain although the gateway never heard back. */
async function landTransfer(payer: PrivateKeyAccount, authorization: TransferAuthorization) {
  const { local } = stack;
  const signature = await signTransferAuthorization(local, payer, authorization);
  const { from, to, value, validAfter, validBefore, nonce } = authorization;
  const hash = await local.deployer.writeContract({
    address: local.usdc,
    abi: testUsdcAbi,
    functionName: 'transferWithAuthorization',
    args: [from, to, value, validAfter, validBefore, nonce, ...splitSignature(signature)],
  });
  await local.publicClient.waitForTransactionReceipt({ hash });
  return hash;
}

const inAMinute = () => BigInt(Math.floor(Date.now() / 1000) + 60);

describe('a settlement left pending by a crash', () => {
  test('whose transfer landed is confirmed with that transaction: the payer is never charged twice', async () => {
    const payer = await payerOwingSmallCost(0);
    const { settlement, authorization } = await crashedSettlement(payer, inAMinute());
    const hash = await landTransfer(payer, authorization);
    const paid = await usdcBalance(stack.local, payer.address);

    const { headers, exchanges } = await chat(stack, payer);
    // The debt was paid by the landed transfer: the zero-value proof is all the next request needs.
    expect(exchanges.map((e) => e.status)).toEqual([402, 200]);
    expect(settlementOf(headers)).toMatchObject({ success: true, transaction: '' });
    expect(await usdcBalance(stack.local, payer.address)).toBe(paid);
    const [reconciled] = await settlementsOf(stack.gateway.store, payer.address);
    expect(reconciled).toMatchObject({
      id: settlement.id,
      status: 'confirmed',
      txHash: hash,
      amountAtomic: SMALL_COST,
    });
  });

  test('whose authorization expired unused is failed, and the debt is paid once by the next proof', async () => {
    const payer = await payerOwingSmallCost(1);
    const expired = BigInt(Math.floor(Date.now() / 1000) - 1);
    const { settlement } = await crashedSettlement(payer, expired);
    const before = await usdcBalance(stack.local, payer.address);

    const { exchanges } = await chat(stack, payer);
    expect(exchanges.map((e) => e.status)).toEqual([402, 402, 200]);
    expect(await usdcBalance(stack.local, payer.address)).toBe(before - SMALL_COST);
    const settlements = await settlementsOf(stack.gateway.store, payer.address);
    expect(settlements.find((s) => s.id === settlement.id)).toMatchObject({
      status: 'failed',
      failureReason: 'the payment authorization expired without being used',
    });
    expect(settlements.filter((s) => s.status === 'confirmed').map((s) => s.amountAtomic)).toEqual([
      SMALL_COST,
    ]);
  });

  test('whose authorization may still land holds the payer with 503 and retry-after', async () => {
    const payer = await payerOwingSmallCost(2);
    await crashedSettlement(payer, inAMinute());
    const error = await chat(stack, payer).catch((e: unknown) => e);
    expect(error).toMatchObject({ status: 503, error: { code: 'payments_unavailable' } });
    expect((error as { headers: Headers }).headers.get('retry-after')).toBe('3');
    expect((await debtOf(stack.gateway.store, payer.address)).owedAtomic).toBe(SMALL_COST);
  });
});

describe('a settlement left sent whose payer never comes back', () => {
  const byTheCollector = { timeout: 10_000, interval: 100 };

  test('whose transfer landed is confirmed by the collector: paid once, the ledger equals the chain', async () => {
    const payer = await payerOwingSmallCost(3);
    const { settlement, authorization } = await crashedSettlement(payer, inAMinute());
    const hash = await landTransfer(payer, authorization);
    await markSettlementSent(stack.gateway.store, settlement.id, hash);
    const paid = await usdcBalance(stack.local, payer.address);

    await vi.waitFor(async () => {
      const [finished] = await settlementsOf(stack.gateway.store, payer.address);
      expect(finished).toMatchObject({ id: settlement.id, status: 'confirmed', txHash: hash });
    }, byTheCollector);
    expect((await debtOf(stack.gateway.store, payer.address)).owedAtomic).toBe(0n);
    expect(await usdcBalance(stack.local, payer.address)).toBe(paid);
    expect((await reconcileWithChain(stack.gateway.store, stack.local)).mismatches).toEqual([]);
  });

  test('whose authorization expired unused is failed by the collector: the debt is owed again', async () => {
    const payer = await payerOwingSmallCost(4);
    const { settlement } = await crashedSettlement(payer, BigInt(Math.floor(Date.now() / 1000) - 1));
    await markSettlementSent(stack.gateway.store, settlement.id, `0x${'ab'.repeat(32)}`);
    const before = await usdcBalance(stack.local, payer.address);

    await vi.waitFor(async () => {
      const [finished] = await settlementsOf(stack.gateway.store, payer.address);
      expect(finished).toMatchObject({ id: settlement.id, status: 'failed' });
    }, byTheCollector);
    expect((await debtOf(stack.gateway.store, payer.address)).owedAtomic).toBe(SMALL_COST);
    expect(await usdcBalance(stack.local, payer.address)).toBe(before);
    expect((await reconcileWithChain(stack.gateway.store, stack.local)).mismatches).toEqual([]);
  });
});
