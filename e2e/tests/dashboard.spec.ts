import { expect, type Page, type TestInfo, test } from '@playwright/test';
import OpenAI from 'openai';
import {
  type Address,
  createPublicClient,
  createTestClient,
  createWalletClient,
  defineChain,
  erc20Abi,
  formatUnits,
  getAddress,
  type Hash,
  type Hex,
  hexToNumber,
  http,
  parseEventLogs,
} from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { delegationDesignator, upgradeEoa } from '../../server/devkit/wallet/eip7702.js';
import {
  type Erc20PeriodicPermissionRequest,
  grantErc20PeriodicPermission,
  supportedExecutionPermissions,
} from '../../server/devkit/wallet/execution-permissions.js';
import { fetchTerms } from '../../server/src/client/index.js';
import { installBrowserWallet } from '../support/browser-wallet.js';
import { stackFacts } from '../support/stack.js';

const stack = stackFacts();
/** anvil's dev account #3: the dashboard's "test account" on a local chain. */
const TEST_ACCOUNT = '0x90F79bf6EB2c4f870365E785982E1f101E93b906';
const PICO_PER_ATOMIC = 1_000_000n;

const localChain = defineChain({
  id: stack.chainId,
  name: 'Local chain (anvil)',
  nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
  rpcUrls: { default: { http: [stack.rpcUrl] } },
});
const chain = createPublicClient({ chain: localChain, transport: http(stack.rpcUrl), pollingInterval: 100 });

/** Full-page screenshots of the main screens, kept as artifacts of the run (and attached to the report). */
async function screen(page: Page, testInfo: TestInfo, name: string): Promise<void> {
  const path = testInfo.outputPath(`${name}.png`);
  await page.screenshot({ path, fullPage: true });
  await testInfo.attach(name, { path, contentType: 'image/png' });
}

/** Catalog price (USD per million tokens, a decimal string) in pico-USD per token. */
function picoPerToken(usdPerMillion: string): bigint {
  const [whole, fraction = ''] = usdPerMillion.split('.');
  return BigInt(whole!) * 1_000_000n + BigInt(fraction.padEnd(6, '0'));
}

const usd = (pico: bigint) => `$${formatUnits(pico, 12)}`;
const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

interface Pricing {
  input: string;
  output: string;
  cache_read?: string;
  cache_write?: string;
  reasoning: string;
}

interface Call {
  requestId: string;
  model: string;
  providerPico: bigint;
  commissionPico: bigint;
  totalPico: bigint;
}

/** What a request must cost, from the usage the client was told and the prices the gateway publishes. */
function expectedCost(usage: OpenAI.CompletionUsage, pricing: Pricing, commissionBps: number) {
  const cached = usage.prompt_tokens_details?.cached_tokens ?? 0;
  // the gateway reports cache writes beside cached reads (Anthropic bills them apart)
  const cacheWrite =
    (usage.prompt_tokens_details as { cache_write_tokens?: number } | undefined)?.cache_write_tokens ?? 0;
  const reasoning = usage.completion_tokens_details?.reasoning_tokens ?? 0;
  const providerPico =
    BigInt(usage.prompt_tokens - cached - cacheWrite) * picoPerToken(pricing.input) +
    BigInt(cached) * picoPerToken(pricing.cache_read ?? pricing.input) +
    BigInt(cacheWrite) * picoPerToken(pricing.cache_write ?? pricing.input) +
    BigInt(usage.completion_tokens - reasoning) * picoPerToken(pricing.output) +
    BigInt(reasoning) * picoPerToken(pricing.reasoning);
  const commissionPico = (providerPico * BigInt(commissionBps)) / 10_000n;
  return { providerPico, commissionPico, totalPico: providerPico + commissionPico };
}

/** The USDC transfers (from -> to, atomic units) a confirmed transaction made. */
async function usdcTransfers(hash: Hash) {
  const receipt = await chain.getTransactionReceipt({ hash });
  expect(receipt.status).toBe('success');
  return parseEventLogs({ abi: erc20Abi, eventName: 'Transfer', logs: receipt.logs })
    .filter((log) => getAddress(log.address) === getAddress(stack.usdc))
    .map((log) => ({ from: getAddress(log.args.from), to: getAddress(log.args.to), value: log.args.value }));
}

/** Three chat requests with the official openai client and the page's token, and what each must cost. */
async function threeRequests(token: string): Promise<[Call, Call, Call]> {
  const client = new OpenAI({ baseURL: `${stack.gatewayUrl}/v1`, apiKey: token, maxRetries: 0 });
  const models = await client.models.list();
  const pricing = new Map(
    models.data.map((model) => [model.id, (model as unknown as { pricing: Pricing }).pricing]),
  );
  const calls: Call[] = [];
  for (const [model, content] of [
    ['anthropic/claude-sonnet-5.5', 'Say hello in five words.'],
    ['google/gemini-3.8-flash', 'Name three prime numbers.'],
    ['anthropic/claude-sonnet-5.5', 'What is the capital of France?'],
  ] as const) {
    const { data, response } = await client.chat.completions
      .create({ model, messages: [{ role: 'user', content }], max_tokens: 100 })
      .withResponse();
    expect(data.choices[0]?.message.content).toBeTruthy();
    const requestId = response.headers.get('x-request-id');
    expect(requestId).toBeTruthy();
    const prices = pricing.get(model);
    if (!data.usage || !prices) throw new Error(`no usage or no price for ${model}`);
    calls.push({ requestId: requestId!, model, ...expectedCost(data.usage, prices, stack.commissionBps) });
  }
  return calls as [Call, Call, Call];
}

/**
 * The usage panel shows each call with its exact cost, the earlier two paid and the last owed; each
 * settlement moved exactly what was owed from `payer` to the treasury (rounded up to a whole USDC unit;
 * the excess is credit for the next one). Returns the panel, its rows, and the USDC the two moved.
 */
async function expectEarlierTwoPaid(page: Page, [first, second, third]: [Call, Call, Call], payer: Address) {
  const usage = page.getByRole('region', { name: '4. Usage and payments' });
  const rowOf = (call: Call) => usage.locator(`tr[data-request-id="${call.requestId}"]`);
  for (const call of [first, second, third]) {
    const cells = rowOf(call).getByRole('cell');
    await expect(cells.nth(1)).toHaveText(call.model);
    await expect(cells.nth(5)).toHaveText(usd(call.providerPico));
    await expect(cells.nth(6)).toHaveText(usd(call.commissionPico));
    await expect(cells.nth(7)).toHaveText(usd(call.totalPico));
  }
  await expect(rowOf(first).getByRole('cell').nth(8)).toHaveText('Paid');
  await expect(rowOf(second).getByRole('cell').nth(8)).toHaveText('Paid');
  await expect(rowOf(third).getByRole('cell').nth(8)).toHaveText('Owed');
  await expect(rowOf(third).getByRole('cell').nth(9)).toHaveText('none yet');

  const spent = first.totalPico + second.totalPico + third.totalPico;
  await expect(usage.getByTestId('spent-total')).toHaveText(usd(spent));
  await expect(usage.getByTestId('unpaid')).toHaveText(usd(third.totalPico));

  const txOf = async (call: Call) =>
    (await rowOf(call).getByRole('cell').nth(9).locator('[data-tx]').getAttribute('data-tx')) as Hash;
  const [firstTx, secondTx] = [await txOf(first), await txOf(second)];
  expect(firstTx).not.toBe(secondTx);
  const ceilAtomic = (pico: bigint) => (pico + PICO_PER_ATOMIC - 1n) / PICO_PER_ATOMIC;
  const firstPaid = ceilAtomic(first.totalPico);
  const credit = firstPaid * PICO_PER_ATOMIC - first.totalPico;
  const secondPaid = ceilAtomic(second.totalPico - credit);
  const treasury = getAddress(stack.treasury) as Address;
  expect(await usdcTransfers(firstTx)).toEqual([{ from: payer, to: treasury, value: firstPaid }]);
  expect(await usdcTransfers(secondTx)).toEqual([{ from: payer, to: treasury, value: secondPaid }]);
  await expect(usage.getByTestId('paid-on-chain')).toHaveText(`$${formatUnits(firstPaid + secondPaid, 6)}`);
  return { usage, rowOf, paid: firstPaid + secondPaid };
}

test('a test wallet authorizes a session and sees every request it paid, to the last pico-dollar', async ({
  page,
}, testInfo) => {
  await page.goto(stack.gatewayUrl);
  await expect(page.getByRole('heading', { name: '1. Connect a wallet' })).toBeVisible();
  await expect(page.getByText('Gateway: ok')).toBeVisible();
  // Every step is on the page from the start, each saying what it waits for.
  await expect(page.getByRole('region', { name: '2. Smart account' })).toContainText(
    "Connect a wallet on the gateway's network first.",
  );
  await screen(page, testInfo, '01-connect');

  // 1. connect anvil's test account
  await page.getByRole('button', { name: 'Use test account' }).click();
  const wallet = page.getByRole('region', { name: '1. Wallet' });
  await expect(wallet.getByText(TEST_ACCOUNT)).toBeVisible();

  // 2. its smart account does not exist yet: create and fund it
  const account = page.getByRole('region', { name: '2. Smart account' });
  await expect(account.getByTestId('account-deployed')).toHaveText('Not yet');
  await expect(account.getByTestId('usdc-balance')).toHaveText('0 USD Coin');
  await account.getByRole('button', { name: 'Create and fund' }).click();
  await expect(account.getByText('The smart account is ready')).toBeVisible();
  await expect(account.getByTestId('account-deployed')).toHaveText('Yes');
  await expect(account.getByTestId('usdc-balance')).toHaveText('100 USD Coin');
  const smartAccount = getAddress((await account.getByTestId('smart-account-address').textContent()) ?? '');
  expect(await chain.getCode({ address: smartAccount })).toBeTruthy();

  // 3. the delegation in plain words; the first signature request is declined in the wallet
  const session = page.getByRole('region', { name: '3. Session key' });
  await expect(session.getByTestId('delegation-summary')).toContainText('at most 50 USDC per day');
  await screen(page, testInfo, '02-authorize');
  const isChainRpc = (url: URL) => url.origin === new URL(stack.rpcUrl).origin;
  await page.route(isChainRpc, async (route) => {
    const body = route.request().postDataJSON() as { id: number; method: string };
    if (body.method !== 'eth_signTypedData_v4') return route.continue();
    await route.fulfill({
      json: { jsonrpc: '2.0', id: body.id, error: { code: 4001, message: 'User rejected the request.' } },
    });
  });
  await session.getByRole('button', { name: 'Sign and authorize' }).click();
  await expect(session.getByRole('alert')).toContainText('Signature rejected');
  await expect(session.getByRole('alert')).toContainText('Nothing was signed or sent');
  await screen(page, testInfo, '03-signature-rejected');
  await page.unroute(isChainRpc);

  // ... and the second is signed
  await session.getByRole('button', { name: 'Sign and authorize' }).click();
  await expect(session.getByText('Session authorized')).toBeVisible();
  const token = await session.getByRole('textbox', { name: 'Access token' }).inputValue();
  expect(token).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/);
  await expect(session.getByRole('tabpanel', { name: 'TypeScript' })).toContainText(token);
  await screen(page, testInfo, '04-session');

  // 4. three requests with the official openai client and the token from the page
  const calls = await threeRequests(token);
  const [first, second, third] = calls;
  const client = new OpenAI({ baseURL: `${stack.gatewayUrl}/v1`, apiKey: token, maxRetries: 0 });

  // 5. the page shows each request with its exact cost; the earlier two are paid on chain, from the smart account
  const { usage, rowOf } = await expectEarlierTwoPaid(page, calls, smartAccount);

  // the charts give each model's and each day's exact spend
  const perModel = usage.getByRole('img', { name: /^Spend per model/ });
  await expect(perModel).toHaveAccessibleName(
    new RegExp(escapeRegExp(`anthropic/claude-sonnet-5.5: ${usd(first.totalPico + third.totalPico)}`)),
  );
  await expect(perModel).toHaveAccessibleName(
    new RegExp(escapeRegExp(`google/gemini-3.8-flash: ${usd(second.totalPico)}`)),
  );
  const perDay = new Map<string, bigint>();
  for (const call of calls) {
    const instant = await rowOf(call).locator('time').getAttribute('datetime');
    const day = new Date(instant!).toISOString().slice(0, 10);
    perDay.set(day, (perDay.get(day) ?? 0n) + call.totalPico);
  }
  for (const [day, pico] of perDay)
    await expect(usage.getByRole('img', { name: /^Spend per day/ })).toHaveAccessibleName(
      new RegExp(escapeRegExp(`${day}: ${usd(pico)}`)),
    );
  await screen(page, testInfo, '05-usage');

  // the model filter narrows the table to that model's requests
  await usage.getByLabel('Model', { exact: true }).selectOption('google/gemini-3.8-flash');
  await expect(usage.locator('tbody tr')).toHaveCount(1);
  await expect(rowOf(second)).toBeVisible();
  await screen(page, testInfo, '06-usage-filtered');

  // ten rows a page: eight more requests make a second page, shown without a reload
  await usage.getByRole('button', { name: 'Clear filters' }).click();
  for (let call = 0; call < 8; call++)
    await client.chat.completions.create({
      model: 'google/gemini-3.5-flash-lite',
      messages: [{ role: 'user', content: `Request ${call}` }],
      max_tokens: 20,
    });
  await expect(usage.locator('tbody tr')).toHaveCount(10);
  await expect(rowOf(first)).toHaveCount(0);
  await usage.getByRole('button', { name: 'Next page' }).click();
  await expect(usage.getByText('Page 2')).toBeVisible();
  await expect(usage.locator('tbody tr')).toHaveCount(1);
  await expect(rowOf(first)).toBeVisible();
  await usage.getByRole('button', { name: 'Previous page' }).click();
  await expect(usage.locator('tbody tr')).toHaveCount(10);

  // revoking ends the session: the page offers a new one and the gateway refuses the old token
  await session.getByRole('button', { name: 'Revoke session' }).click();
  await expect(session.getByRole('button', { name: 'Sign and authorize' })).toBeVisible();
  const refused = await client.chat.completions
    .create({ model: 'google/gemini-3.5-flash-lite', messages: [{ role: 'user', content: 'Still there?' }] })
    .catch((error: unknown) => error);
  expect(refused).toBeInstanceOf(OpenAI.AuthenticationError);
});

test('a gateway that does not answer is said so, with a way to retry', async ({ page }, testInfo) => {
  await page.route('**/v1/authorize', (route) => route.abort('connectionrefused'));
  await page.route('**/health', (route) => route.abort('connectionrefused'));
  await page.goto(stack.gatewayUrl);
  const alert = page.getByRole('alert');
  await expect(alert).toContainText('Cannot reach the gateway');
  await expect(alert).toContainText('The gateway is not answering');
  await screen(page, testInfo, '07-gateway-down');

  await page.unroute('**/v1/authorize');
  await page.unroute('**/health');
  await alert.getByRole('button', { name: 'Try again' }).click();
  await expect(page.getByRole('heading', { name: '1. Connect a wallet' })).toBeVisible();
});

test('a browser wallet on another network is asked to switch, then gets on', async ({ page }, testInfo) => {
  const BASE_MAINNET = 8453;
  await installBrowserWallet(page, {
    account: TEST_ACCOUNT,
    startChainId: BASE_MAINNET,
    rpcUrl: stack.rpcUrl,
  });
  await page.goto(stack.gatewayUrl);
  await page.getByRole('button', { name: 'Connect browser wallet' }).click();

  const wallet = page.getByRole('region', { name: '1. Wallet' });
  await expect(wallet.getByText(TEST_ACCOUNT)).toBeVisible();
  const warning = wallet.getByRole('status').filter({ hasText: 'Wrong network' });
  await expect(warning).toContainText('Your wallet is on Base; this gateway settles on Local chain (anvil).');
  const account = page.getByRole('region', { name: '2. Smart account' });
  await expect(account).toContainText("Connect a wallet on the gateway's network first.");
  await expect(account.getByTestId('smart-account-address')).toHaveCount(0);
  await expect(page.getByRole('button', { name: 'Sign and authorize' })).toHaveCount(0);
  await screen(page, testInfo, '08-wrong-network');

  await warning.getByRole('button', { name: 'Switch to Local chain (anvil)' }).click();
  await expect(warning).toHaveCount(0);
  await expect(wallet.getByText('Local chain (anvil)')).toBeVisible();
  await expect(account.getByTestId('smart-account-address')).toBeVisible();
});

test('a wallet granting ERC-7715 permissions pays from its own address (EIP-7702): one grant, then each earlier request is paid from its USDC', async ({
  page,
}, testInfo) => {
  const terms = await fetchTerms(stack.gatewayUrl);
  // a fresh EOA holding 100 USDC, upgraded on chain to the framework's stateless DeleGator
  const owner = privateKeyToAccount(generatePrivateKey());
  const sponsor = createWalletClient({
    account: privateKeyToAccount(generatePrivateKey()),
    chain: localChain,
    transport: http(stack.rpcUrl),
  });
  await Promise.all([
    fund({ address: owner.address, usdc: '100', eth: '0' }),
    fund({ address: sponsor.account.address, usdc: '0', eth: '1' }),
  ]);
  const implementation = terms.environment.implementations.EIP7702StatelessDeleGatorImpl as Address;
  await upgradeEoa({ owner, implementation, sponsor, client: chain });
  expect(await chain.getCode({ address: owner.address })).toBe(delegationDesignator(implementation));

  // the wallet grants as MetaMask's Advanced Permissions do, signing with the EOA's key
  const asked: Erc20PeriodicPermissionRequest[] = [];
  await installBrowserWallet(page, {
    account: owner.address,
    startChainId: stack.chainId,
    rpcUrl: stack.rpcUrl,
    permissions: async (method, params) => {
      if (method === 'wallet_getSupportedExecutionPermissions')
        return supportedExecutionPermissions(stack.chainId);
      const [request] = params as [Erc20PeriodicPermissionRequest];
      asked.push(request);
      return [
        await grantErc20PeriodicPermission({ request, owner, client: chain, environment: terms.environment }),
      ];
    },
  });
  await page.goto(stack.gatewayUrl);
  await page.getByRole('button', { name: 'Connect browser wallet' }).click();
  await expect(page.getByRole('region', { name: '1. Wallet' }).getByText(owner.address)).toBeVisible();

  const account = page.getByRole('region', { name: '2. Smart account' });
  await account.getByRole('radio', { name: 'My own address (EIP-7702)' }).check();
  await expect(account.getByTestId('smart-account-address')).toHaveText(owner.address);
  await expect(account.getByTestId('account-upgraded')).toHaveText('Yes');
  await expect(account.getByTestId('usdc-balance')).toHaveText('100 USD Coin');

  // what is granted, in plain words, before the wallet is asked
  const session = page.getByRole('region', { name: '3. Session key' });
  const summary = session.getByTestId('delegation-summary');
  await expect(summary).toContainText("from your own address to the operator's treasury");
  await expect(summary).toContainText('at most 50 USDC per day');
  await expect(session.getByRole('heading', { name: 'What you are granting' })).toBeVisible();
  await screen(page, testInfo, '09-grant-own-address');
  await session.getByRole('button', { name: 'Grant and authorize' }).click();
  await expect(session.getByText('Session authorized')).toBeVisible();
  const token = await session.getByRole('textbox', { name: 'Access token' }).inputValue();

  // the wallet was asked for 50 USDC a day of USDC to the session key, paid to the treasury only, for 7 days
  expect(asked).toHaveLength(1);
  const [request] = asked as [Erc20PeriodicPermissionRequest];
  expect(request).toMatchObject({
    chainId: `0x${stack.chainId.toString(16)}`,
    from: owner.address,
    to: terms.sessionKey,
    permission: {
      type: 'erc20-token-periodic',
      isAdjustmentAllowed: false,
      data: { tokenAddress: terms.usdc.address, periodAmount: '0x2faf080', periodDuration: 86_400 },
    },
  });
  expect(request.rules).toContainEqual({ type: 'payee', data: { addresses: [terms.treasury] } });
  const expiry = request.rules?.find((rule) => rule.type === 'expiry')?.data as { timestamp: number };
  expect(expiry.timestamp * 1000 - Date.now()).toBeGreaterThan(7 * 86_400_000 - 120_000);
  expect(hexToNumber(request.chainId)).toBe(stack.chainId);

  // three requests: the earlier two are paid from the EOA's own USDC
  const calls = await threeRequests(token);
  const { paid } = await expectEarlierTwoPaid(page, calls, owner.address);
  expect(
    await chain.readContract({
      address: stack.usdc,
      abi: erc20Abi,
      functionName: 'balanceOf',
      args: [owner.address],
    }),
  ).toBe(100_000_000n - paid);
  await screen(page, testInfo, '10-own-address-usage');
});

test('a wallet that upgrades the address as it grants: the page waits for the upgrade, then authorizes', async ({
  page,
}) => {
  const terms = await fetchTerms(stack.gatewayUrl);
  const owner = privateKeyToAccount(generatePrivateKey());
  const sponsor = createWalletClient({
    account: privateKeyToAccount(generatePrivateKey()),
    chain: localChain,
    transport: http(stack.rpcUrl),
  });
  await fund({ address: sponsor.account.address, usdc: '0', eth: '1' });
  const implementation = terms.environment.implementations.EIP7702StatelessDeleGatorImpl as Address;
  let upgrade: Promise<unknown> | undefined;
  await installBrowserWallet(page, {
    account: owner.address,
    startChainId: stack.chainId,
    rpcUrl: stack.rpcUrl,
    permissions: async (method, params) => {
      if (method === 'wallet_getSupportedExecutionPermissions')
        return supportedExecutionPermissions(stack.chainId);
      const [request] = params as [Erc20PeriodicPermissionRequest];
      const granted = await grantErc20PeriodicPermission({
        request,
        owner,
        client: chain,
        environment: terms.environment,
      });
      // as MetaMask does for an account that is not a smart account yet: the upgrade is sent, not yet mined
      upgrade = upgradeEoa({ owner, implementation, sponsor, client: chain });
      return [granted];
    },
  });
  await page.goto(stack.gatewayUrl);
  await page.getByRole('button', { name: 'Connect browser wallet' }).click();
  const account = page.getByRole('region', { name: '2. Smart account' });
  await account.getByRole('radio', { name: 'My own address (EIP-7702)' }).check();
  await expect(account.getByTestId('account-upgraded')).toHaveText('Not yet');
  const session = page.getByRole('region', { name: '3. Session key' });
  await session.getByRole('button', { name: 'Grant and authorize' }).click();
  await expect(session.getByText('Session authorized')).toBeVisible();
  await upgrade;
  await expect(account.getByTestId('account-upgraded')).toHaveText('Yes');
});

test('a grant the gateway cannot accept (the expiry removed in the wallet) is refused, and the page says what is missing', async ({
  page,
}) => {
  const terms = await fetchTerms(stack.gatewayUrl);
  const owner = privateKeyToAccount(generatePrivateKey());
  const sponsor = createWalletClient({
    account: privateKeyToAccount(generatePrivateKey()),
    chain: localChain,
    transport: http(stack.rpcUrl),
  });
  await fund({ address: sponsor.account.address, usdc: '0', eth: '1' });
  const implementation = terms.environment.implementations.EIP7702StatelessDeleGatorImpl as Address;
  await upgradeEoa({ owner, implementation, sponsor, client: chain });
  await installBrowserWallet(page, {
    account: owner.address,
    startChainId: stack.chainId,
    rpcUrl: stack.rpcUrl,
    permissions: async (method, params) => {
      if (method === 'wallet_getSupportedExecutionPermissions')
        return supportedExecutionPermissions(stack.chainId);
      const [request] = params as [Erc20PeriodicPermissionRequest];
      // MetaMask lets the user remove the expiry rule before approving
      const rules = request.rules?.filter((rule) => rule.type !== 'expiry');
      return [
        await grantErc20PeriodicPermission({
          request: { ...request, rules },
          owner,
          client: chain,
          environment: terms.environment,
        }),
      ];
    },
  });
  await page.goto(stack.gatewayUrl);
  await page.getByRole('button', { name: 'Connect browser wallet' }).click();
  await page
    .getByRole('region', { name: '2. Smart account' })
    .getByRole('radio', { name: 'My own address (EIP-7702)' })
    .check();
  const session = page.getByRole('region', { name: '3. Session key' });
  await session.getByRole('button', { name: 'Grant and authorize' }).click();
  const alert = session.getByRole('alert');
  await expect(alert).toContainText('The session was not authorized');
  await expect(alert).toContainText('must set an expiry');
  await expect(session.getByRole('button', { name: 'Grant and authorize' })).toBeEnabled();
});

test('a wallet without ERC-7715 signs the delegation itself, from its own upgraded address', async ({
  page,
}) => {
  const terms = await fetchTerms(stack.gatewayUrl);
  // anvil's dev account #3 signs through anvil; upgraded with anvil_setCode, as no browser wallet here signs authorizations
  const implementation = terms.environment.implementations.EIP7702StatelessDeleGatorImpl as Address;
  const dev = createTestClient({ chain: localChain, mode: 'anvil', transport: http(stack.rpcUrl) });
  const OWN = '0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65'; // anvil's dev account #4
  await dev.setCode({ address: OWN, bytecode: delegationDesignator(implementation) as Hex });
  await fund({ address: OWN, usdc: '10', eth: '0' });
  await installBrowserWallet(page, { account: OWN, startChainId: stack.chainId, rpcUrl: stack.rpcUrl });
  await page.goto(stack.gatewayUrl);
  await page.getByRole('button', { name: 'Connect browser wallet' }).click();
  const account = page.getByRole('region', { name: '2. Smart account' });
  await account.getByRole('radio', { name: 'My own address (EIP-7702)' }).check();
  await expect(account.getByTestId('account-upgraded')).toHaveText('Yes');
  const session = page.getByRole('region', { name: '3. Session key' });
  await session.getByRole('button', { name: 'Grant and authorize' }).click();
  await expect(session.getByText('Session authorized')).toBeVisible();
  await expect(session.getByText(OWN)).toBeVisible();
});

/** The local stack's faucet: test USDC and ETH on the local chain. */
async function fund(grant: { address: Address; usdc: string; eth: string }): Promise<void> {
  const response = await fetch(`${stack.faucetUrl}/fund`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(grant),
  });
  expect(response.status).toBe(200);
}
