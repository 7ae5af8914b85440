import type { Address, Hash } from 'viem';
import { beforeAll, describe, expect, test } from 'vitest';
import { createPayerAccount, mintUsdc, usdcBalance } from '../../devkit/chain/index.js';
import { debtOf, recordUsage } from '../../src/billing/ledger.js';
import { settlementsOf } from '../../src/billing/settlements.js';
import { recordAuthorization } from '../../src/payments/x402/authorizations.js';
import { transferAuthorization } from '../chain/authorizations.js';
import type { RpcProxy } from '../faults/rpc-proxy.js';
import { completedRequest } from '../support/usage-entries.js';
import {
  authorizationOf,
  chat,
  freshEoa,
  landTransfer,
  type PayerSigner,
  payerOwingSmallCost,
  proofFor,
  requiredOf,
  SMALL_COST,
  sendProof,
  settlementOf,
  smartSigner,
  useX402Stack,
} from './harness.js';

// The chain moves while the gateway settles a proof: the payer spends the proof's nonce first, its
// balance moves away, another instance takes the same proof, the node cannot be read. The gateway
// reaches the chain through a proxy that holds or fails its calls at the step a test aims at; the
// test's own transactions go to the chain directly.
const stack = useX402Stack({ rpcProxy: true });
let rpc: RpcProxy;
let treasury: Address;

beforeAll(() => {
  rpc = stack.rpc!;
  treasury = stack.local.accounts.treasury.address;
});

/** Sends the proof; while the gateway's transaction is held before it reaches the node, runs `meanwhile`. */
function whileItsTransactionIsHeld(header: string, meanwhile: () => Promise<unknown>) {
  return whileHeld(header, () => rpc.stallFrom('eth_sendRawTransaction'), meanwhile);
}

/** Sends the proof; once `hold` (armed before it is sent) holds the gateway's calls to the node, runs `meanwhile`. */
async function whileHeld(header: string, hold: () => Promise<void>, meanwhile: () => Promise<unknown>) {
  const held = hold();
  const answer = sendProof(stack, 'PAYMENT-SIGNATURE', header);
  await held;
  try {
    await meanwhile();
  } finally {
    rpc.pass();
  }
  return answer;
}

const treasuryBalance = () => usdcBalance(stack.local, treasury);

describe("the payer's nonce spent before the gateway's transaction lands", () => {
  test('the proof is refused: 402 for the debt, nothing forwarded, and the next proof pays it once', async () => {
    const payer = await payerOwingSmallCost(stack);
    const header = await proofFor(stack, payer, SMALL_COST);
    const before = await treasuryBalance();
    const forwarded = stack.anthropic.log.length;
    let spentBy: Hash | undefined;

    const response = await whileItsTransactionIsHeld(header, async () => {
      // The payer's own authorization under the proof's nonce, 0 USDC to itself, lands first.
      const { nonce } = authorizationOf(header);
      const own = { ...transferAuthorization(payer.address, payer.address, 0n), nonce };
      spentBy = await landTransfer(stack.local, payer, own);
    });
    expect(response.status).toBe(402);
    expect(requiredOf(response.headers).accepts[0]!.amount).toBe(SMALL_COST.toString());
    expect(stack.anthropic.log.length).toBe(forwarded);
    expect(await treasuryBalance()).toBe(before);
    const [failed] = await settlementsOf(stack.gateway.store, payer.address);
    expect(failed).toMatchObject({
      status: 'failed',
      failureReason: expect.stringContaining(`nonce was used by transaction ${spentBy}, which did not pay`),
    });

    const { exchanges } = await chat(stack, payer);
    expect(exchanges.map((e) => e.status)).toEqual([402, 402, 200]);
    expect(await treasuryBalance()).toBe(before + SMALL_COST);
  });
});

describe("the proof's authorization landed by someone else before the gateway sends it", () => {
  test.each<[string, () => Promise<void>, boolean]>([
    ['as its transaction would be sent', () => rpc.stallFrom('eth_estimateGas'), false],
    // Landed once the proof checked out, blocks before the settlement opens: its settlement looks
    // for it from before the verification.
    [
      'as its proof was verified, blocks before the settlement opened',
      () => rpc.stallAfter('eth_call'),
      true,
    ],
  ])(
    '%s: the settlement is confirmed by that transaction, the payer is not asked to pay again',
    async (_, hold, newBlock) => {
      const payer = await payerOwingSmallCost(stack);
      const header = await proofFor(stack, payer, SMALL_COST);
      const before = await treasuryBalance();
      let landed: Hash | undefined;

      const response = await whileHeld(header, hold, async () => {
        landed = await landTransfer(stack.local, payer, authorizationOf(header));
        if (newBlock) await stack.local.testClient.mine({ blocks: 1 });
      });
      expect(response.status).toBe(200);
      expect(settlementOf(response.headers)).toMatchObject({ success: true, transaction: landed });
      const settlements = await settlementsOf(stack.gateway.store, payer.address);
      expect(settlements.map((s) => [s.status, s.txHash])).toEqual([['confirmed', landed]]);
      expect(await treasuryBalance()).toBe(before + SMALL_COST);
    },
  );
});

describe("the gateway's transaction reverts while its authorization stays valid", () => {
  test('the payer is held with 503 (no new proof is taken), and once anyone lands the authorization it pays once', async () => {
    const payer = await payerOwingSmallCost(stack);
    const header = await proofFor(stack, payer, SMALL_COST);
    const funds = await usdcBalance(stack.local, payer.address);
    const before = await treasuryBalance();

    const response = await whileItsTransactionIsHeld(header, () =>
      // The payer's balance moves away: the gateway's transfer reverts.
      landTransfer(
        stack.local,
        payer,
        transferAuthorization(payer.address, stack.local.accounts.deployer.address, funds),
      ),
    );
    expect(response.status).toBe(503);
    expect(response.headers.get('retry-after')).toBe('3');
    expect((await response.json()).error.code).toBe('payments_unavailable');
    const [sent] = await settlementsOf(stack.gateway.store, payer.address);
    expect(sent).toMatchObject({ status: 'sent', amountAtomic: SMALL_COST });
    const reverted = await stack.local.publicClient.getTransactionReceipt({ hash: sent!.txHash! });
    expect(reverted.status).toBe('reverted');
    // Its calldata shows the signed authorization to anyone, valid until it expires: a new proof
    // now could pay the debt twice.
    await expect(chat(stack, payer)).rejects.toMatchObject({ status: 503 });

    await mintUsdc(stack.local, payer.address, funds);
    const landed = await landTransfer(stack.local, payer, authorizationOf(header));
    const { exchanges } = await chat(stack, payer);
    expect(exchanges.map((e) => e.status)).toEqual([402, 200]);
    const settlements = await settlementsOf(stack.gateway.store, payer.address);
    expect(settlements.map((s) => [s.status, s.txHash])).toEqual([['confirmed', landed]]);
    expect(await treasuryBalance()).toBe(before + SMALL_COST);
  });
});

/** The payer's request while the node fails `method` (from its first call on): what it was refused with. */
async function chatWhileFailing(method: string, payer: PayerSigner): Promise<unknown> {
  const failing = rpc.downFrom(method);
  try {
    const error = await chat(stack, payer).catch((e: unknown) => e);
    await failing;
    return error;
  } finally {
    rpc.pass();
  }
}

describe('the chain cannot be read', () => {
  test('as the proof of the debt would be verified: 503 with retry-after, nothing left open, then the debt is paid once', async () => {
    const payer = await payerOwingSmallCost(stack);
    const before = await usdcBalance(stack.local, payer.address);
    const error = await chatWhileFailing('eth_blockNumber', payer);
    expect(error).toMatchObject({
      status: 503,
      error: { code: 'payments_unavailable', message: 'the chain cannot be read; retry shortly' },
    });
    expect((error as { headers: Headers }).headers.get('retry-after')).toBe('3');
    expect(await settlementsOf(stack.gateway.store, payer.address)).toEqual([]);

    const { exchanges } = await chat(stack, payer);
    expect(exchanges.map((e) => e.status)).toEqual([402, 402, 200]);
    expect(await usdcBalance(stack.local, payer.address)).toBe(before - SMALL_COST);
  });
});

describe('the node fails while a proof is verified', () => {
  test.each<[string, string, () => Promise<PayerSigner>]>([
    ["the payer's code", 'eth_getCode', () => freshEoa(stack)],
    [
      "a smart account's ERC-1271 check",
      'eth_call',
      async () =>
        smartSigner(
          await createPayerAccount(stack.local, stack.local.accounts.payers[3]!.privateKey, {
            fundUsdc: 1_000_000n,
          }),
        ),
    ],
  ])('as it reads %s: 503 with retry-after, not an invalid proof', async (_, method, payerOf) => {
    const payer = await payerOf();
    const error = await chatWhileFailing(method, payer);
    expect(error).toMatchObject({
      status: 503,
      error: {
        code: 'payments_unavailable',
        message: 'the payment facilitator cannot be reached; retry shortly',
      },
    });
    expect((error as { headers: Headers }).headers.get('retry-after')).toBe('3');
    const { exchanges } = await chat(stack, payer);
    expect(exchanges.map((e) => e.status)).toEqual([402, 200]);
  });
});

describe('a proof another gateway instance took meanwhile', () => {
  /** A 402 refusing the proof as used before, asking for what the payer owes. */
  const expectRefusedAsReplay = (response: Response, owedAtomic: bigint) => {
    expect(response.status).toBe(402);
    const required = requiredOf(response.headers);
    expect(required.error).toMatch(/this payment proof was used before/);
    expect(required.accepts[0]!.amount).toBe(owedAtomic.toString());
  };
  /** Records the proof's authorization in the shared database, as another instance records a proof it takes. */
  const takenByAnotherInstance = (payer: Address, authorization: ReturnType<typeof authorizationOf>) =>
    recordAuthorization(stack.gateway.store, {
      asset: stack.local.usdc,
      payer,
      nonce: authorization.nonce,
      valueAtomic: authorization.value,
      validBefore: authorization.validBefore,
      settlementId: null,
      fromBlock: null,
    });

  test('is refused as a replay asking what the payer owes, and its settlement is not left open', async () => {
    const payer = await payerOwingSmallCost(stack);
    const header = await proofFor(stack, payer, SMALL_COST);
    const authorization = authorizationOf(header);
    // Held before the proof is verified, past the check for a used proof.
    const held = rpc.stallFrom('eth_blockNumber');
    const answer = sendProof(stack, 'PAYMENT-SIGNATURE', header);
    try {
      await held;
      await takenByAnotherInstance(payer.address, authorization);
    } finally {
      rpc.pass();
    }
    expectRefusedAsReplay(await answer, SMALL_COST);
    const [refused] = await settlementsOf(stack.gateway.store, payer.address);
    expect(refused).toMatchObject({
      status: 'failed',
      failureReason: 'its payment proof had been used before',
    });
    expect((await debtOf(stack.gateway.store, payer.address)).owedAtomic).toBe(SMALL_COST);
  });

  test('and whose request left another debt meanwhile: refused as a replay, not asked to pay the new amount', async () => {
    const payer = await payerOwingSmallCost(stack);
    const header = await proofFor(stack, payer, SMALL_COST);
    const authorization = authorizationOf(header);
    const store = stack.gateway.store;
    // Held while the facilitator verifies the proof: past the check for a used proof, before the lock.
    const verifying = rpc.stallFrom('eth_call');
    const answer = sendProof(stack, 'PAYMENT-SIGNATURE', header);
    try {
      await verifying;
      // The other instance took the proof, and the request it paid for was recorded.
      await takenByAnotherInstance(payer.address, authorization);
      await recordUsage(store, completedRequest(payer.address, 7_000_000n, { rail: 'x402' }));
    } finally {
      rpc.pass();
    }
    expectRefusedAsReplay(await answer, SMALL_COST + 7n);
    expect(await settlementsOf(store, payer.address)).toEqual([]);
  });
});
