import type { Hash, TransactionReceipt } from 'viem';
import { describe, expect, test } from 'vitest';
import { authorize, newPayer, openaiFor, chat as sessionChat } from '../session/harness.js';
import { fundedEoa, settlementOf, useX402Stack, type X402Stack, chat as x402Chat } from '../x402/harness.js';
import { parseExposition, type Sample, sampleValue } from './prometheus-text.js';

async function scrape(stack: X402Stack): Promise<Sample[]> {
  const res = await stack.gateway.app.inject({ method: 'GET', url: '/metrics' });
  expect(res.statusCode).toBe(200);
  return parseExposition(res.body);
}

const relayerBalance = (stack: X402Stack) =>
  stack.local.publicClient.getBalance({ address: stack.local.accounts.gateway.address });
const feeOf = (receipt: TransactionReceipt) => receipt.gasUsed * receipt.effectiveGasPrice;

/** The receipts of every transaction the relayer sent in blocks `from` to the latest. */
async function relayerReceiptsSince(stack: X402Stack, from: bigint): Promise<TransactionReceipt[]> {
  const latest = await stack.local.publicClient.getBlockNumber();
  const receipts: TransactionReceipt[] = [];
  for (let number = from; number <= latest; number++) {
    const block = await stack.local.publicClient.getBlock({ blockNumber: number, includeTransactions: true });
    for (const tx of block.transactions)
      if (tx.from.toLowerCase() === stack.local.accounts.gateway.address.toLowerCase())
        receipts.push(await stack.local.publicClient.getTransactionReceipt({ hash: tx.hash }));
  }
  return receipts;
}

const gas = (samples: Sample[], rail: string, kind: string) => ({
  transactions: sampleValue(samples, 'paygate_settlement_gas_used_count', { rail, kind }) ?? 0,
  gasUsed: sampleValue(samples, 'paygate_settlement_gas_used_sum', { rail, kind }) ?? 0,
  feeWei: sampleValue(samples, 'paygate_settlement_fee_wei_total', { rail, kind }) ?? 0,
});

describe("the relayer's ETH, both rails settled in process", () => {
  const stack = useX402Stack();
  const receiptOf = (hash: Hash) => stack.local.publicClient.getTransactionReceipt({ hash });

  test('the balance gauge is the relayer balance the chain states', async () => {
    const samples = await scrape(stack);
    expect(sampleValue(samples, 'paygate_relayer_balance_wei')).toBe(Number(await relayerBalance(stack)));
    // 10,000 ETH at about 1 gwei: some 40 million settlements of 250,000 gas.
    expect(sampleValue(samples, 'paygate_relayer_settlements_left')).toBeGreaterThan(1e7);
  });

  test('a session settlement (with its account deployment) and an x402 settlement: gas and fees as their receipts state', async () => {
    const startBlock = (await stack.local.publicClient.getBlockNumber()) + 1n;
    const balanceBefore = await relayerBalance(stack);

    // An account authorized before it exists: the gateway deploys it before its first settlement.
    const payer = await newPayer(stack.local, 0, { salt: 21, deploy: false });
    const client = openaiFor(stack.gateway, (await authorize(stack.gateway, payer)).token);
    stack.anthropic.script({ text: 'one', usage: { input_tokens: 10, output_tokens: 2 } });
    await sessionChat(client);
    stack.anthropic.script({ text: 'two', usage: { input_tokens: 10, output_tokens: 2 } });
    const session = await receiptOf((await sessionChat(client)).headers.get('x-settlement-tx') as Hash);

    const eoa = await fundedEoa(stack, 1);
    await x402Chat(stack, eoa);
    const x402 = await receiptOf(settlementOf((await x402Chat(stack, eoa)).headers).transaction as Hash);

    const samples = await scrape(stack);
    expect(gas(samples, 'session', 'settlement')).toEqual({
      transactions: 1,
      gasUsed: Number(session.gasUsed),
      feeWei: Number(feeOf(session)),
    });
    expect(gas(samples, 'x402', 'settlement')).toEqual({
      transactions: 1,
      gasUsed: Number(x402.gasUsed),
      feeWei: Number(feeOf(x402)),
    });
    const sent = await relayerReceiptsSince(stack, startBlock);
    const [deployment, ...others] = sent.filter(
      (receipt) =>
        receipt.transactionHash !== session.transactionHash &&
        receipt.transactionHash !== x402.transactionHash,
    );
    expect(others).toEqual([]);
    expect(gas(samples, 'session', 'deployment')).toEqual({
      transactions: 1,
      gasUsed: Number(deployment!.gasUsed),
      feeWei: Number(feeOf(deployment!)),
    });
    // Read again after the relayer's transactions: the gauge fell by exactly what they cost.
    const balanceAfter = await relayerBalance(stack);
    expect(balanceBefore - balanceAfter).toBe(feeOf(session) + feeOf(x402) + feeOf(deployment!));
    expect(sampleValue(samples, 'paygate_relayer_balance_wei')).toBe(Number(balanceAfter));
  });
});

describe('x402 settled by a remote facilitator', () => {
  const stack = useX402Stack({ remoteFacilitator: true });

  test("its transactions are paid by the facilitator's key: no gas or fee counted, the relayer's balance unchanged", async () => {
    const balanceBefore = await relayerBalance(stack);
    const eoa = await fundedEoa(stack, 1);
    await x402Chat(stack, eoa);
    const paid = settlementOf((await x402Chat(stack, eoa)).headers).transaction as Hash;
    const sender = (await stack.local.publicClient.getTransaction({ hash: paid })).from;
    expect(sender.toLowerCase()).toBe(stack.facilitator!.address.toLowerCase());
    const samples = await scrape(stack);
    expect(gas(samples, 'x402', 'settlement')).toEqual({ transactions: 0, gasUsed: 0, feeWei: 0 });
    expect(sampleValue(samples, 'paygate_relayer_balance_wei')).toBe(Number(balanceBefore));
  });
});
