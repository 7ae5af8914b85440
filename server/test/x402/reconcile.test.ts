import type { Hash, Hex } from 'viem';
import type { PrivateKeyAccount } from 'viem/accounts';
import { describe, expect, test, vi } from 'vitest';
import { mintUsdc, testUsdcAbi, usdcBalance } from '../../devkit/chain/index.js';
import { debtOf } from '../../src/billing/ledger.js';
import {
  markSettlementSent,
  openSettlement,
  type Settlement,
  settlementsOf,
} from '../../src/billing/settlements.js';
import type { OutboxDeps } from '../../src/payments/outbox/reconcile.js';
import { recordAuthorization } from '../../src/payments/x402/authorizations.js';
import { reconcileX402Settlement } from '../../src/payments/x402/reconcile.js';
import {
  signCancelAuthorization,
  splitSignature,
  type TransferAuthorization,
  transferAuthorization,
} from '../chain/authorizations.js';
import { reconcileWithChain } from '../support/ledger-checks.js';
import {
  chat,
  landTransfer,
  payerOwingSmallCost,
  SMALL_COST,
  settlementOf,
  useX402Stack,
} from './harness.js';

// A gateway that crashed while settling leaves an x402 settlement pending; the payer's next
// request finishes it from what the chain says about the proof's authorization, or the collector
// does when the payer does not come back.

// The collector runs every 0.2 s and finishes settlements untouched for a second.
const stack = useX402Stack({ limits: { collectorIntervalMs: 200, settlementTimeoutMs: 1_000 } });

/** A validBefore `seconds` from now (in the past when negative). */
const inSeconds = (seconds: number) => BigInt(Math.floor(Date.now() / 1000) + seconds);

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

/** The payer cancels the authorization (EIP-3009 `cancelAuthorization`): its nonce is spent, nothing moves. */
async function cancelAuthorization(payer: PrivateKeyAccount, authorization: TransferAuthorization) {
  const { local } = stack;
  const signature = await signCancelAuthorization(local, payer, {
    from: payer.address,
    nonce: authorization.nonce,
  });
  const hash = await local.deployer.writeContract({
    address: local.usdc,
    abi: testUsdcAbi,
    functionName: 'cancelAuthorization',
    args: [payer.address, authorization.nonce, ...splitSignature(signature)],
  });
  await local.publicClient.waitForTransactionReceipt({ hash });
  return hash;
}

/** The gateway's transaction of the authorization, reverted: the payer's balance had moved away (it is back now). */
async function revertedTransfer(payer: PrivateKeyAccount, authorization: TransferAuthorization) {
  const { local } = stack;
  const funds = await usdcBalance(local, payer.address);
  await landTransfer(
    local,
    payer,
    transferAuthorization(payer.address, local.accounts.deployer.address, funds),
  );
  const hash = await landTransfer(local, payer, authorization, { gas: 200_000n });
  expect((await local.publicClient.getTransactionReceipt({ hash })).status).toBe('reverted');
  await mintUsdc(local, payer.address, funds);
  return hash;
}

/** The payer's next request is held: 503 with retry-after, its debt still owed. */
async function expectHeld(payer: PrivateKeyAccount) {
  const error = await chat(stack, payer).catch((e: unknown) => e);
  expect(error).toMatchObject({ status: 503, error: { code: 'payments_unavailable' } });
  expect((error as { headers: Headers }).headers.get('retry-after')).toBe('3');
  expect((await debtOf(stack.gateway.store, payer.address)).owedAtomic).toBe(SMALL_COST);
}

/**
 * The payer's next request is asked for its debt and pays it with a new proof: the settlement left
 * by the crash is failed (with `reason`), and the payer and the treasury see one payment.
 */
async function expectFailedThenPaidOnce(payer: PrivateKeyAccount, settlementId: string, reason: string) {
  const { local } = stack;
  const treasury = local.accounts.treasury.address;
  const before = [await usdcBalance(local, payer.address), await usdcBalance(local, treasury)] as const;
  const { exchanges } = await chat(stack, payer);
  expect(exchanges.map((e) => e.status)).toEqual([402, 402, 200]);
  expect(await usdcBalance(local, payer.address)).toBe(before[0] - SMALL_COST);
  expect(await usdcBalance(local, treasury)).toBe(before[1] + SMALL_COST);
  const settlements = await settlementsOf(stack.gateway.store, payer.address);
  expect(settlements.find((s) => s.id === settlementId)).toMatchObject({
    status: 'failed',
    failureReason: reason,
  });
  expect(settlements.filter((s) => s.status === 'confirmed').map((s) => s.amountAtomic)).toEqual([
    SMALL_COST,
  ]);
}

/**
 * The payer's settlements against the chain's transfers (`npm run reconcile`). Other payers' are left
 * out: a payer that spends its proof's nonce on 1 unit to the treasury is a transfer no settlement
 * records, as it should be.
 */
async function expectLedgerMatchesChain(payer: PrivateKeyAccount) {
  const { mismatches } = await reconcileWithChain(stack.gateway.store, stack.local);
  expect(mismatches.filter((mismatch) => !mismatch.payer || mismatch.payer === payer.address)).toEqual([]);
}

describe('a settlement left pending by a crash', () => {
  test('whose transfer landed is confirmed with that transaction: the payer is never charged twice', async () => {
    const payer = await payerOwingSmallCost(stack);
    const { settlement, authorization } = await crashedSettlement(payer, inSeconds(60));
    const hash = await landTransfer(stack.local, payer, authorization);
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

  test('read before its proof was recorded, then sent by the instance that opened it: not failed on that stale look', async () => {
    const payer = await payerOwingSmallCost(stack);
    const store = stack.gateway.store;
    const stale = (await openSettlement(store, payer.address, 'x402')) as Settlement;
    // The instance that opened it (its payer lock lost) sends it while this one looks.
    await markSettlementSent(store, stale.id, `0x${'ab'.repeat(32)}`);
    // No proof recorded, as this look saw: it ends there, without asking the chain.
    const outcome = await reconcileX402Settlement(
      { store, chain: {} as OutboxDeps['chain'], receiptTimeoutMs: 1_000 },
      stale,
    );
    expect(outcome).toBe('pending');
    const [current] = await settlementsOf(store, payer.address);
    expect(current).toMatchObject({ id: stale.id, status: 'sent' });
  });

  test('whose authorization expired unused is failed, and the debt is paid once by the next proof', async () => {
    const payer = await payerOwingSmallCost(stack);
    const { settlement } = await crashedSettlement(payer, inSeconds(-1));
    await expectFailedThenPaidOnce(
      payer,
      settlement.id,
      'the payment authorization expired without being used',
    );
  });

  test('whose authorization may still land holds the payer with 503 and retry-after', async () => {
    const payer = await payerOwingSmallCost(stack);
    await crashedSettlement(payer, inSeconds(60));
    await expectHeld(payer);
  });

  // EIP-3009 nonces are the payer's: any authorization the payer signs under the proof's nonce
  // spends it, and only a transfer of the amount to the treasury pays the settlement.
  test.each<[string, (payer: PrivateKeyAccount, nonce: Hex) => Promise<Hash>]>([
    [
      'a transfer of 0 to itself',
      (payer, nonce) =>
        landTransfer(stack.local, payer, {
          ...transferAuthorization(payer.address, payer.address, 0n),
          nonce,
        }),
    ],
    [
      'a transfer of 1 unit to the treasury',
      (payer, nonce) =>
        landTransfer(stack.local, payer, {
          ...transferAuthorization(payer.address, stack.local.accounts.treasury.address, 1n),
          nonce,
        }),
    ],
    [
      'a receiveWithAuthorization paying someone else',
      (payer, nonce) =>
        landTransfer(
          stack.local,
          payer,
          { ...transferAuthorization(payer.address, stack.local.accounts.deployer.address, 0n), nonce },
          { primaryType: 'ReceiveWithAuthorization' },
        ),
    ],
  ])(
    'whose nonce the payer spent on %s is failed, and the debt is paid once by the next proof',
    async (_, spend) => {
      const payer = await payerOwingSmallCost(stack);
      const { settlement, authorization } = await crashedSettlement(payer, inSeconds(60));
      const spentBy = await spend(payer, authorization.nonce);
      await expectFailedThenPaidOnce(
        payer,
        settlement.id,
        `the payment authorization's nonce was used by transaction ${spentBy}, which did not pay ${SMALL_COST} USDC atomic units to the treasury`,
      );
    },
  );

  test('whose authorization the payer canceled is failed at once, and the debt is paid once by the next proof', async () => {
    const payer = await payerOwingSmallCost(stack);
    const { settlement, authorization } = await crashedSettlement(payer, inSeconds(60));
    const canceledBy = await cancelAuthorization(payer, authorization);
    await expectFailedThenPaidOnce(
      payer,
      settlement.id,
      `the payer canceled the payment authorization (transaction ${canceledBy})`,
    );
  });

  test('whose transaction reverted holds the payer while its authorization may still land, and is failed once it expired', async () => {
    const payer = await payerOwingSmallCost(stack);
    const { settlement, authorization } = await crashedSettlement(payer, inSeconds(3));
    await markSettlementSent(
      stack.gateway.store,
      settlement.id,
      await revertedTransfer(payer, authorization),
    );
    // The signed authorization is public in the reverted transaction: anyone may land it until it expires.
    await expectHeld(payer);
    await vi.waitFor(
      async () =>
        expect((await stack.local.publicClient.getBlock()).timestamp).toBeGreaterThanOrEqual(
          authorization.validBefore,
        ),
      { timeout: 10_000, interval: 200 },
    );
    await expectFailedThenPaidOnce(
      payer,
      settlement.id,
      'the payment authorization expired without being used',
    );
  });
});

describe('a settlement left sent whose payer never comes back', () => {
  const byTheCollector = { timeout: 10_000, interval: 100 };

  test('whose transfer landed is confirmed by the collector: paid once, the ledger equals the chain', async () => {
    const payer = await payerOwingSmallCost(stack);
    const { settlement, authorization } = await crashedSettlement(payer, inSeconds(60));
    const hash = await landTransfer(stack.local, payer, authorization);
    await markSettlementSent(stack.gateway.store, settlement.id, hash);
    const paid = await usdcBalance(stack.local, payer.address);

    await vi.waitFor(async () => {
      const [finished] = await settlementsOf(stack.gateway.store, payer.address);
      expect(finished).toMatchObject({ id: settlement.id, status: 'confirmed', txHash: hash });
    }, byTheCollector);
    expect((await debtOf(stack.gateway.store, payer.address)).owedAtomic).toBe(0n);
    expect(await usdcBalance(stack.local, payer.address)).toBe(paid);
    await expectLedgerMatchesChain(payer);
  });

  test.each<
    [string, number, (payer: PrivateKeyAccount, authorization: TransferAuthorization) => Promise<unknown>]
  >([
    ['expired unused', -1, async () => {}],
    ['was canceled by the payer', 60, cancelAuthorization],
  ])(
    'whose authorization %s is failed by the collector: the debt is owed again',
    async (_, validFor, meanwhile) => {
      const payer = await payerOwingSmallCost(stack);
      const { settlement, authorization } = await crashedSettlement(payer, inSeconds(validFor));
      await meanwhile(payer, authorization);
      await markSettlementSent(stack.gateway.store, settlement.id, `0x${'ab'.repeat(32)}`);
      const before = await usdcBalance(stack.local, payer.address);

      await vi.waitFor(async () => {
        const [finished] = await settlementsOf(stack.gateway.store, payer.address);
        expect(finished).toMatchObject({ id: settlement.id, status: 'failed' });
      }, byTheCollector);
      expect((await debtOf(stack.gateway.store, payer.address)).owedAtomic).toBe(SMALL_COST);
      expect(await usdcBalance(stack.local, payer.address)).toBe(before);
      await expectLedgerMatchesChain(payer);
    },
  );
});
