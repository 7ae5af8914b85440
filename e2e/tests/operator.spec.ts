import { expect, test } from '@playwright/test';
import { x402Client } from '@x402/core/client';
import { decodePaymentResponseHeader } from '@x402/core/http';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { wrapFetchWithPayment } from '@x402/fetch';
import { createPublicClient, formatEther, formatUnits, type Hash, http } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { stackFacts } from '../support/stack.js';

const stack = stackFacts();
const chain = createPublicClient({ transport: http(stack.rpcUrl) });

interface EconomicsDay {
  day: string;
  rail: string;
  commission: { usd: string; picoUsd: string };
  gasSpentWei: string;
  gasSpentEth: string;
}

/** A query of the gateway's GraphQL with the operator token, as an operator's script sends it. */
async function asOperator<T>(query: string): Promise<T> {
  const response = await fetch(`${stack.gatewayUrl}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${stack.adminToken}` },
    body: JSON.stringify({ query }),
  });
  const body = (await response.json()) as { data: T; errors?: unknown };
  expect(body.errors).toBeUndefined();
  return body.data;
}

/**
 * A fresh EOA funded by the faucet pays two requests on the x402 rail, as a stock client does (a
 * payer with debt is asked 0, which names it, then what it owes): the second settles the first.
 */
async function payTwoRequestsWithX402(): Promise<{ payer: string; txHash: Hash }> {
  const account = privateKeyToAccount(generatePrivateKey());
  const funded = await fetch(`${stack.faucetUrl}/fund`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ address: account.address, usdc: '5', eth: '0' }),
  });
  expect(funded.status).toBe(200);
  const client = new x402Client();
  registerExactEvmScheme(client, { signer: account });
  client.setSpendControls({ allowedAssets: [{ network: `eip155:${stack.chainId}`, asset: stack.usdc }] });
  const paying = wrapFetchWithPayment(wrapFetchWithPayment(fetch, client), client);
  let settlement: string | null = null;
  for (const content of ['Say hello.', 'Say goodbye.']) {
    const response = await paying(`${stack.gatewayUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'anthropic/claude-sonnet-5.5',
        messages: [{ role: 'user', content }],
        max_tokens: 50,
      }),
    });
    expect(response.status).toBe(200);
    settlement = response.headers.get('PAYMENT-RESPONSE');
  }
  if (!settlement) throw new Error('the second request settled nothing');
  return { payer: account.address, txHash: decodePaymentResponseHeader(settlement).transaction as Hash };
}

test('the operator enters the ADMIN_TOKEN and sees commission against gas, and the relayer balance', async ({
  page,
}) => {
  const { payer, txHash } = await payTwoRequestsWithX402();
  const receipt = await chain.getTransactionReceipt({ hash: txHash });
  const fee = receipt.gasUsed * receipt.effectiveGasPrice;
  const { usage } = await asOperator<{
    usage: { edges: Array<{ node: { cost: { commission: { picoUsd: string } } } }> };
  }>(`{ usage(wallet: "${payer}", first: 10) { edges { node { cost { commission { picoUsd } } } } } }`);
  expect(usage.edges).toHaveLength(2);
  const commission = usage.edges.reduce((sum, edge) => sum + BigInt(edge.node.cost.commission.picoUsd), 0n);

  // Nothing else on this stack pays by x402: today's x402 figures are this payer's alone.
  const today = new Date().toISOString().slice(0, 10);
  const { operator } = await asOperator<{ operator: { economics: EconomicsDay[] } }>(
    '{ operator { economics { day rail commission { usd picoUsd } gasSpentWei gasSpentEth } } }',
  );
  const x402Day = operator.economics.find((day) => day.day === today && day.rail === 'x402');
  expect(x402Day).toMatchObject({
    commission: { picoUsd: commission.toString() },
    gasSpentWei: fee.toString(),
    gasSpentEth: formatEther(fee),
  });

  await page.goto(`${stack.gatewayUrl}/#/operator`);
  const tokenField = page.getByLabel('Operator token (ADMIN_TOKEN)');
  await tokenField.fill('not-the-operator-token');
  await page.getByRole('button', { name: 'Open the operator view' }).click();
  await expect(page.getByRole('alert')).toContainText('The gateway refused this token');

  await tokenField.fill(stack.adminToken);
  await page.getByRole('button', { name: 'Open the operator view' }).click();
  const economics = page.getByTestId('economics');
  const row = economics.getByRole('row').filter({ hasText: today }).filter({ hasText: 'x402' });
  await expect(row.getByRole('cell').nth(3)).toHaveText(`$${formatUnits(commission, 12)}`);
  await expect(row.getByRole('cell').nth(6)).toHaveText(formatEther(fee));
  // Both rails' days added up, exactly (after the "Total" row header).
  const sum = (values: string[]) => values.reduce((total, value) => total + BigInt(value), 0n);
  const totals = page.getByTestId('economics-total').getByRole('cell');
  await expect(totals.nth(1)).toHaveText(
    `$${formatUnits(sum(operator.economics.map((day) => day.commission.picoUsd)), 12)}`,
  );
  await expect(totals.nth(4)).toHaveText(formatEther(sum(operator.economics.map((day) => day.gasSpentWei))));

  const relayer = page.getByRole('region', { name: 'Relayer' });
  const address = (await relayer.locator('code').textContent()) as `0x${string}`;
  const balance = await chain.getBalance({ address });
  await expect(relayer.getByTestId('relayer-balance')).toHaveText(`${formatEther(balance)} ETH`);
  await expect(relayer.getByTestId('settlements-left')).toContainText('settlements of');
  await expect(page.getByRole('region', { name: 'Collector' }).getByTestId('collector-state')).toHaveText(
    /^(collecting|standing by)$/,
  );

  // The token lasts for the tab: a reload opens the view again without asking.
  await page.reload();
  await expect(page.getByTestId('economics')).toBeVisible();
});
