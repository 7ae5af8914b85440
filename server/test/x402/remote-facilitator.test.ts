import { HTTPFacilitatorClient } from '@x402/core/http';
import type { SettleResponse } from '@x402/core/types';
import type { Hash } from 'viem';
import { type PrivateKeyAccount, privateKeyToAccount } from 'viem/accounts';
import { beforeAll, expect, test } from 'vitest';
import { createLocalWalletClient, mintUsdc, testUsdcAbi, usdcBalance } from '../../devkit/chain/index.js';
import type { FacilitatorServer } from '../../devkit/facilitator.js';
import { debtOf } from '../../src/billing/ledger.js';
import { settlementsOf } from '../../src/billing/settlements.js';
import {
  chat,
  chatBody,
  fundedEoa,
  openaiClient,
  payerOwingSmallCost,
  payingClient,
  payingFetch,
  SMALL_COST,
  settlementOf,
  useX402Stack,
} from './harness.js';

const stack = useX402Stack({ remoteFacilitator: true });
let facilitator: FacilitatorServer;

beforeAll(() => {
  facilitator = stack.facilitator!;
});

/**
 * The payer's next chat while the facilitator answers /settle with `answer` (given the settlement
 * it would make): the completion, or the error it ended with.
 */
async function chatWhileSettleAnswers(
  payer: PrivateKeyAccount,
  answer: NonNullable<FacilitatorServer['answerSettle']>,
) {
  facilitator.answerSettle = answer;
  try {
    return await chat(stack, payer).catch((error: unknown) => error);
  } finally {
    facilitator.answerSettle = undefined;
  }
}

/** A settle answer claiming `transaction` settled or not, without settling anything. */
const claiming =
  (payer: PrivateKeyAccount, transaction: string, success = true) =>
  async (): Promise<SettleResponse> => ({
    success,
    ...(success ? {} : { errorReason: 'unexpected_settle_error' }),
    transaction,
    network: 'eip155:31337',
    payer: payer.address,
  });

const unavailable = { status: 503, error: { code: 'payments_unavailable' } };

test('the facilitator server answers /supported with the exact scheme on the local chain', async () => {
  const supported = await new HTTPFacilitatorClient({ url: facilitator.url }).getSupported();
  expect(supported.kinds).toContainEqual({ x402Version: 2, scheme: 'exact', network: 'eip155:31337' });
  expect(supported.signers['eip155:*']).toEqual([facilitator.address]);
});

test('with FACILITATOR_URL the remote facilitator verifies and settles, and the gateway relayer sends nothing', async () => {
  const { local } = stack;
  const payer = await fundedEoa(stack, 5, 1_000_000n);
  const relayer = local.accounts.gateway.address;
  const relayerNonce = await local.publicClient.getTransactionCount({ address: relayer });
  facilitator.calls.length = 0;

  const first = await chat(stack, payer);
  expect(settlementOf(first.headers)).toMatchObject({ success: true, transaction: '' });
  expect(facilitator.calls).toEqual(['/verify']);

  const before = await usdcBalance(local, payer.address);
  const second = await chat(stack, payer);
  expect(second.exchanges.map((e) => e.status)).toEqual([402, 402, 200]);
  const settlement = settlementOf(second.headers);
  expect(settlement).toMatchObject({ success: true, network: 'eip155:31337', payer: payer.address });
  const transaction = await local.publicClient.getTransaction({ hash: settlement.transaction as Hash });
  expect(transaction.from.toLowerCase()).toBe(facilitator.address.toLowerCase());
  expect(await usdcBalance(local, payer.address)).toBe(before - SMALL_COST);
  expect(facilitator.calls.slice(1)).toEqual(['/verify', '/verify', '/settle']);
  expect(await local.publicClient.getTransactionCount({ address: relayer })).toBe(relayerNonce);
});

test('a facilitator reporting success for a transaction that did not pay the debt confirms nothing: 503, the debt stays owed', async () => {
  const { local, gateway } = stack;
  const payer = await fundedEoa(stack, 3, 1_000_000n);
  await chat(stack, payer);
  // A real transaction of the payer to the treasury, of another amount than the debt.
  const decoy = await createLocalWalletClient(
    local.chain,
    local.accounts.payers[3]!.privateKey,
  ).writeContract({
    address: local.usdc,
    abi: testUsdcAbi,
    functionName: 'transfer',
    args: [local.accounts.treasury.address, 1n],
  });
  await local.publicClient.waitForTransactionReceipt({ hash: decoy });
  expect(await chatWhileSettleAnswers(payer, claiming(payer, decoy))).toMatchObject(unavailable);
  const [settlement] = await settlementsOf(gateway.store, payer.address);
  expect(settlement).toMatchObject({ status: 'sent', txHash: decoy });
  expect((await debtOf(gateway.store, payer.address)).owedAtomic).toBe(SMALL_COST);
});

test('a settlement is confirmed by the transaction that paid it, not by the one the facilitator names', async () => {
  const { local, gateway } = stack;
  const payer = await fundedEoa(stack, 4, 1_000_000n);
  await chat(stack, payer);
  const unrelated = await mintUsdc(local, local.accounts.treasury.address, 1n);
  const before = await usdcBalance(local, payer.address);
  let paid = '';
  const second = (await chatWhileSettleAnswers(payer, async (settle) => {
    const result = await settle();
    paid = result.transaction;
    return { ...result, transaction: unrelated };
  })) as Awaited<ReturnType<typeof chat>>;
  expect(paid).not.toBe('');
  expect(settlementOf(second.headers)).toMatchObject({ success: true, transaction: paid });
  const [settlement] = await settlementsOf(gateway.store, payer.address);
  expect(settlement).toMatchObject({ status: 'confirmed', txHash: paid });
  expect(await usdcBalance(local, payer.address)).toBe(before - SMALL_COST);
});

test('a facilitator naming something that is not a transaction hash: 503, and nothing is taken for a transaction', async () => {
  const { gateway } = stack;
  const payer = await fundedEoa(stack, 2, 1_000_000n);
  await chat(stack, payer);
  expect(await chatWhileSettleAnswers(payer, claiming(payer, '0xabc'))).toMatchObject(unavailable);
  const [settlement] = await settlementsOf(gateway.store, payer.address);
  expect(settlement).toMatchObject({ status: 'pending', txHash: null });
  expect((await debtOf(gateway.store, payer.address)).owedAtomic).toBe(SMALL_COST);
});

test('a facilitator refusing with something it calls a transaction (not a hash): the authorization may land, so 503, not asked again', async () => {
  const { gateway } = stack;
  const payer = await fundedEoa(stack, 1, 1_000_000n);
  await chat(stack, payer);
  expect(await chatWhileSettleAnswers(payer, claiming(payer, 'submitted', false))).toMatchObject(unavailable);
  const [settlement] = await settlementsOf(gateway.store, payer.address);
  expect(settlement).toMatchObject({ status: 'pending', txHash: null });
});

test('a facilitator that sent the payment but answers a failure naming no transaction: the chain confirms it, and the payer pays once', async () => {
  const { local, gateway } = stack;
  const payer = await payerOwingSmallCost(stack);
  const before = await usdcBalance(local, payer.address);
  // As x402's reference facilitator answers when sending throws after the node took the transaction.
  const answered = await chatWhileSettleAnswers(payer, async (settle) => {
    const sent = await settle();
    expect(sent.success).toBe(true);
    return { ...sent, success: false, errorReason: 'unexpected_settle_error', transaction: '' };
  });
  expect(answered).not.toBeInstanceOf(Error);
  expect((answered as Awaited<ReturnType<typeof chat>>).exchanges.at(-1)?.status).toBe(200);
  const [settlement] = await settlementsOf(gateway.store, payer.address);
  expect(settlement).toMatchObject({ status: 'confirmed', amountAtomic: SMALL_COST });
  expect(await usdcBalance(local, payer.address)).toBe(before - SMALL_COST);
});

test('an unreachable facilitator is 503 with retry-after, not a 402 or a 500', async () => {
  await facilitator.close();
  const payer = privateKeyToAccount(stack.local.accounts.payers[5]!.privateKey);
  const openai = openaiClient(stack.gateway.url, payingFetch(payingClient(stack.local, payer)));
  const error = await openai.chat.completions.create(chatBody).catch((e: unknown) => e);
  expect(error).toMatchObject(unavailable);
  expect((error as { headers: Headers }).headers.get('retry-after')).toBe('3');
});
