import type { Hash, TransactionReceipt } from 'viem';
import { beforeAll, describe, expect, test } from 'vitest';
import { authorize, newPayer, openaiFor, chat as sessionChat } from '../session/harness.js';
import { fundedEoa, settlementOf, useX402Stack, type X402Stack, chat as x402Chat } from '../x402/harness.js';

const ADMIN_TOKEN = 'operator-token-for-tests-0123';

const OPERATOR_QUERY = `{
  operator {
    economics { day rail requests commission { usd picoUsd } settlements gasUsed gasSpentWei gasSpentEth }
    relayer { address balanceWei settlementsLeft }
    exposure { outstanding { picoUsd } unprovenOutstanding { picoUsd } unfinishedSettlements }
    settlements(status: failed, first: 5) { edges { node { payer failureReason } } }
    collector { running leading failing { payer } }
    topDebtors(first: 5) { wallet owed { picoUsd } unpaid { picoUsd } proven }
  }
}`;

interface EconomicsDay {
  day: string;
  rail: 'session' | 'x402';
  requests: string;
  commission: { usd: string; picoUsd: string };
  settlements: number;
  gasUsed: string;
  gasSpentWei: string;
  gasSpentEth: string;
}

async function graphql(stack: X402Stack, query: string, token?: string) {
  const res = await fetch(`${stack.gateway.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify({ query }),
  });
  return { status: res.status, body: await res.json() };
}

/** Commission of the ledger's records by rail, summed here from each record. */
async function recordedCommission(stack: X402Stack): Promise<Record<string, bigint>> {
  const rows = await stack.gateway.store.db
    .selectFrom('usage_records')
    .select(['rail', 'commission_pico'])
    .execute();
  const sums: Record<string, bigint> = {};
  for (const row of rows) sums[row.rail] = (sums[row.rail] ?? 0n) + row.commission_pico;
  return sums;
}

const feeOf = (receipt: TransactionReceipt) => receipt.gasUsed * receipt.effectiveGasPrice;

describe('the operator view, both rails settled by the gateway on anvil', () => {
  const stack = useX402Stack({ adminToken: ADMIN_TOKEN });
  const receiptOf = (hash: Hash) => stack.local.publicClient.getTransactionReceipt({ hash });
  let session: TransactionReceipt;
  let x402: TransactionReceipt;
  let sessionPayer: Awaited<ReturnType<typeof newPayer>>;
  let sessionToken: string;

  beforeAll(async () => {
    sessionPayer = await newPayer(stack.local, 0);
    sessionToken = (await authorize(stack.gateway, sessionPayer)).token;
    const client = openaiFor(stack.gateway, sessionToken);
    stack.anthropic.script({ text: 'one', usage: { input_tokens: 10, output_tokens: 2 } });
    await sessionChat(client);
    stack.anthropic.script({ text: 'two', usage: { input_tokens: 30, output_tokens: 5 } });
    session = await receiptOf((await sessionChat(client)).headers.get('x-settlement-tx') as Hash);

    const eoa = await fundedEoa(stack, 1);
    await x402Chat(stack, eoa);
    x402 = await receiptOf(settlementOf((await x402Chat(stack, eoa)).headers).transaction as Hash);
  });

  test("commission is the sum of the records' commissions, gas what the settlements' receipts state", async () => {
    const { status, body } = await graphql(stack, OPERATOR_QUERY, ADMIN_TOKEN);
    expect(status).toBe(200);
    expect(body.errors).toBeUndefined();
    const economics: EconomicsDay[] = body.data.operator.economics;
    const commission = await recordedCommission(stack);
    const today = new Date().toISOString().slice(0, 10);
    expect(economics).toEqual([
      {
        day: today,
        rail: 'session',
        requests: '2',
        commission: { usd: expect.any(String), picoUsd: commission.session!.toString() },
        settlements: 1,
        gasUsed: session.gasUsed.toString(),
        gasSpentWei: feeOf(session).toString(),
        gasSpentEth: expect.any(String),
      },
      {
        day: today,
        rail: 'x402',
        requests: '2',
        commission: { usd: expect.any(String), picoUsd: commission.x402!.toString() },
        settlements: 1,
        gasUsed: x402.gasUsed.toString(),
        gasSpentWei: feeOf(x402).toString(),
        gasSpentEth: expect.any(String),
      },
    ]);
    expect(Number(economics[0]!.gasSpentEth) * 1e18).toBeCloseTo(Number(feeOf(session)), -3);
  });

  test("the relayer's balance is the chain's; exposure and the largest debts are the records served since the last settlements", async () => {
    const { body } = await graphql(stack, OPERATOR_QUERY, ADMIN_TOKEN);
    const { relayer, exposure, topDebtors, settlements, collector } = body.data.operator;
    const gateway = stack.local.accounts.gateway.address;
    expect(relayer.address).toBe(gateway);
    expect(relayer.balanceWei).toBe(
      (await stack.local.publicClient.getBalance({ address: gateway })).toString(),
    );
    expect(BigInt(relayer.settlementsLeft)).toBeGreaterThan(0n);

    const unpaid = await stack.gateway.store.db
      .selectFrom('usage_records')
      .select(['payer', 'total_pico'])
      .where('settlement_id', 'is', null)
      .execute();
    expect(unpaid).toHaveLength(2);
    const outstanding = unpaid.reduce((sum, record) => sum + record.total_pico, 0n);
    // Both payers paid once: none of it is unproven.
    expect(exposure).toEqual({
      outstanding: { picoUsd: outstanding.toString() },
      unprovenOutstanding: { picoUsd: '0' },
      unfinishedSettlements: 0,
    });
    const owedBy = new Map(unpaid.map((record) => [record.payer, record.total_pico]));
    expect(topDebtors).toHaveLength(2);
    for (const debtor of topDebtors) {
      expect(debtor.unpaid.picoUsd).toBe(owedBy.get(debtor.wallet)!.toString());
      expect(debtor.proven).toBe(true);
    }
    expect(BigInt(topDebtors[0].unpaid.picoUsd)).toBeGreaterThanOrEqual(BigInt(topDebtors[1].unpaid.picoUsd));
    expect(settlements.edges).toEqual([]);
    expect(collector).toMatchObject({ running: true, failing: [] });
  });

  test("the dashboard's operator query runs within the limits and reads the same figures", async () => {
    // A computed specifier: the web package is type-checked by its own tsconfig.
    const { OPERATOR_QUERY: dashboardQuery } = await import(
      new URL('../../../web/src/gateway/graphql.ts', import.meta.url).href
    );
    const dashboard = await graphql(stack, dashboardQuery, ADMIN_TOKEN);
    expect(dashboard.body.errors).toBeUndefined();
    const { body } = await graphql(stack, OPERATOR_QUERY, ADMIN_TOKEN);
    expect(dashboard.body.data.operator.economics).toEqual(
      body.data.operator.economics.map((day: EconomicsDay) => expect.objectContaining(day)),
    );
    expect(dashboard.body.data.operator.failed.edges).toEqual([]);
  });

  test("each settlement keeps its transaction's gas and fee", async () => {
    const { body } = await graphql(
      stack,
      `{ settlements(wallet: "${sessionPayer.address}", status: confirmed) { edges { node { payer txHash gasUsed feeWei } } } }`,
      ADMIN_TOKEN,
    );
    expect(body.data.settlements.edges).toEqual([
      {
        node: {
          payer: sessionPayer.address,
          txHash: session.transactionHash,
          gasUsed: session.gasUsed.toString(),
          feeWei: feeOf(session).toString(),
        },
      },
    ]);
  });

  test("a payer's access token and no token at all are refused the operator view", async () => {
    const asPayer = await graphql(stack, OPERATOR_QUERY, sessionToken);
    expect(asPayer.body.data).toBeNull();
    expect(asPayer.body.errors[0]).toMatchObject({
      message: 'the operator view needs the operator token (ADMIN_TOKEN)',
      extensions: { code: 'FORBIDDEN' },
    });
    const anonymous = await graphql(stack, OPERATOR_QUERY);
    expect(anonymous.body.data).toBeNull();
    expect(anonymous.body.errors[0].extensions.code).toBe('UNAUTHENTICATED');
    const wrongToken = await graphql(stack, OPERATOR_QUERY, 'not-the-operator-token-0123');
    expect(wrongToken.body.data).toBeNull();
    expect(wrongToken.body.errors[0].extensions.code).toBe('UNAUTHENTICATED');
  });

  test('bad arguments are named', async () => {
    const backwards = await graphql(
      stack,
      '{ operator { economics(from: "2030-01-02", to: "2030-01-01") { day } } }',
      ADMIN_TOKEN,
    );
    expect(backwards.body.errors[0]).toMatchObject({
      message: 'from must be before to',
      extensions: { code: 'BAD_USER_INPUT' },
    });
    const tooLong = await graphql(
      stack,
      '{ operator { economics(from: "2028-01-01", to: "2030-01-01") { day } } }',
      ADMIN_TOKEN,
    );
    expect(tooLong.body.errors[0].message).toBe('from and to must be at most 366 days apart');
    const tooMany = await graphql(stack, '{ operator { topDebtors(first: 101) { wallet } } }', ADMIN_TOKEN);
    expect(tooMany.body.errors[0].message).toBe('first must be between 0 and 100');
    const confirmed = await graphql(
      stack,
      '{ operator { settlements(status: confirmed) { edges { cursor } } } }',
      ADMIN_TOKEN,
    );
    expect(confirmed.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
  });
});

describe('the operator view, x402 settled by a remote facilitator', () => {
  const stack = useX402Stack({ remoteFacilitator: true, adminToken: ADMIN_TOKEN });

  test('its settlement cost the operator no gas: a fee of 0 and no gas used', async () => {
    const eoa = await fundedEoa(stack, 1);
    await x402Chat(stack, eoa);
    const paid = settlementOf((await x402Chat(stack, eoa)).headers).transaction as Hash;
    const { body } = await graphql(
      stack,
      `{ operator { economics { rail settlements gasUsed gasSpentWei } }
         settlements(wallet: "${eoa.address}", status: confirmed) { edges { node { txHash gasUsed feeWei } } } }`,
      ADMIN_TOKEN,
    );
    expect(body.data.operator.economics).toEqual([
      { rail: 'x402', settlements: 1, gasUsed: '0', gasSpentWei: '0' },
    ]);
    expect(body.data.settlements.edges).toEqual([{ node: { txHash: paid, gasUsed: null, feeWei: '0' } }]);
  });
});

describe('the operator view while the chain cannot be read', () => {
  const stack = useX402Stack({ rpcProxy: true, adminToken: ADMIN_TOKEN });

  test('the relayer is null with SERVICE_UNAVAILABLE; the ledger figures are still answered', async () => {
    stack.rpc!.down();
    try {
      const { status, body } = await graphql(
        stack,
        '{ operator { relayer { balanceWei } exposure { outstanding { picoUsd } } } }',
        ADMIN_TOKEN,
      );
      expect(status).toBe(200);
      expect(body.data.operator).toEqual({ relayer: null, exposure: { outstanding: { picoUsd: '0' } } });
      expect(body.errors).toHaveLength(1);
      expect(body.errors[0].path).toEqual(['operator', 'relayer']);
      expect(body.errors[0].extensions.code).toBe('SERVICE_UNAVAILABLE');
      expect(body.errors[0].message).toMatch(/^the relayer's balance cannot be read: /);
    } finally {
      stack.rpc!.pass();
    }
  });
});
