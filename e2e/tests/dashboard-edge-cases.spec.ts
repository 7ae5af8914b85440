import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { expect, type Page, type Route, test } from '@playwright/test';
import { getAddress } from 'viem';
import { installBrowserWallet } from '../support/browser-wallet.js';
import { stackFacts } from '../support/stack.js';

const stack = stackFacts();
/** anvil's dev account #3: the dashboard's "test account" on a local chain. */
const TEST_ACCOUNT = '0x90F79bf6EB2c4f870365E785982E1f101E93b906';
const HOUR_MS = 3_600_000;

/** The parts of `GET /v1/authorize`'s terms the tests change. */
interface Terms {
  chainId: number;
  network: string;
  domain: { chainId: number };
  policy: { expiry: { maxSeconds: number } };
  usdc?: unknown;
  rpcUrl?: string;
  devFaucetUrl?: string;
}

/** Answers `GET /v1/authorize` with the gateway's real terms, changed by `change` (POST and DELETE pass). */
async function alterTerms(page: Page, change: (terms: Terms) => void): Promise<void> {
  await page.route('**/v1/authorize', async (route: Route) => {
    if (route.request().method() !== 'GET') return route.continue();
    const response = await route.fetch();
    const body = (await response.json()) as { data: Terms };
    change(body.data);
    await route.fulfill({ response, json: body });
  });
}

/** Connects the test account and returns its smart account (counterfactual: it need not be deployed). */
async function connectTestAccount(page: Page): Promise<`0x${string}`> {
  await page.goto(stack.gatewayUrl);
  await page.getByRole('button', { name: 'Use test account' }).click();
  const account = page.getByRole('region', { name: '2. Smart account' }).getByTestId('smart-account-address');
  await expect(account).toBeVisible();
  return getAddress((await account.textContent()) ?? '');
}

/** Connects the test account and authorizes a session (lasting `lifetime`, when given) from the page. */
async function authorizeInPage(page: Page, lifetime?: string) {
  await connectTestAccount(page);
  const session = page.getByRole('region', { name: '3. Session key' });
  if (lifetime) await session.getByLabel('Session lasts').selectOption({ label: lifetime });
  await session.getByRole('button', { name: 'Sign and authorize' }).click();
  await expect(session.getByText('Session authorized')).toBeVisible();
  const token = await session.getByRole('textbox', { name: 'Access token' }).inputValue();
  return { session, usage: page.getByRole('region', { name: '4. Usage and payments' }), token };
}

/** An access token as a gateway with another JWT_SECRET signed it (each `npm start` makes a new one). */
function tokenOfAnotherGateway(wallet: string, expiresAt: Date): string {
  const part = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const signed = `${part({ alg: 'HS256', typ: 'JWT' })}.${part({ sub: wallet, sid: randomUUID(), exp: Math.floor(expiresAt.getTime() / 1000) })}`;
  return `${signed}.${createHmac('sha256', randomBytes(32)).update(signed).digest('base64url')}`;
}

test('a session revoked elsewhere is forgotten, and the page says why', async ({ page }) => {
  const { session, usage, token } = await authorizeInPage(page);

  // revoked outside the page, as `DELETE /v1/authorize` from any client does
  const revoked = await fetch(`${stack.gatewayUrl}/v1/authorize`, {
    method: 'DELETE',
    headers: { authorization: `Bearer ${token}` },
  });
  expect(revoked.status).toBe(200);

  await expect(session.getByRole('button', { name: 'Sign and authorize' })).toBeVisible();
  const notice = session
    .getByRole('status')
    .filter({ hasText: 'The gateway no longer accepts your session' });
  await expect(notice).toContainText('the session of this access token was revoked or has expired');
  await expect(session.getByText('Session authorized')).toHaveCount(0);
  await expect(page.getByText(token)).toHaveCount(0);
  await expect(usage).toContainText('Authorize a session to see');
  await expect(page.getByText('authorize a new one above')).toHaveCount(0);
  expect(
    await page.evaluate(() => Object.keys(localStorage).filter((key) => key.startsWith('paygate.session'))),
  ).toEqual([]);
});

test('revoking a session the gateway already ended forgets it instead of failing', async ({ page }) => {
  const { session, token } = await authorizeInPage(page);
  // the ledger is out of reach (a hidden tab does not poll it either): only the button finds out
  await page.route('**/graphql', (route) => route.abort('connectionrefused'));
  const revoked = await fetch(`${stack.gatewayUrl}/v1/authorize`, {
    method: 'DELETE',
    headers: { authorization: `Bearer ${token}` },
  });
  expect(revoked.status).toBe(200);

  await session.getByRole('button', { name: 'Revoke session' }).click();
  const notice = session
    .getByRole('status')
    .filter({ hasText: 'The gateway no longer accepts your session' });
  await expect(notice).toContainText('the session of this access token was revoked or has expired');
  await expect(session.getByRole('button', { name: 'Sign and authorize' })).toBeVisible();
  await expect(session.getByText('The session was not revoked')).toHaveCount(0);
});

test('a stored token the gateway no longer knows (new JWT_SECRET) is forgotten, with why', async ({
  page,
}) => {
  const smartAccount = await connectTestAccount(page);
  const expiresAt = new Date(Date.now() + 24 * HOUR_MS);
  const stored = {
    token: tokenOfAnotherGateway(smartAccount, expiresAt),
    sessionId: randomUUID(),
    wallet: smartAccount,
    expiresAt: expiresAt.toISOString(),
    limits: {
      token: stack.usdc,
      recipient: stack.treasury,
      expiresAt: expiresAt.toISOString(),
      totalCapAtomic: '50000000',
    },
  };
  await page.evaluate(
    ([key, value]) => localStorage.setItem(key!, value!),
    [`paygate.session.v1:${stack.chainId}:${smartAccount.toLowerCase()}`, JSON.stringify(stored)],
  );
  await page.reload();
  await page.getByRole('button', { name: 'Use test account' }).click();

  const session = page.getByRole('region', { name: '3. Session key' });
  await expect(session.getByRole('button', { name: 'Sign and authorize' })).toBeVisible();
  const notice = session
    .getByRole('status')
    .filter({ hasText: 'The gateway no longer accepts your session' });
  await expect(notice).toContainText('the access token is not valid');
  await expect(notice).toContainText('JWT_SECRET');
  await expect(page.getByText(stored.token)).toHaveCount(0);

  // a new session replaces the notice
  await session.getByRole('button', { name: 'Sign and authorize' }).click();
  await expect(session.getByText('Session authorized')).toBeVisible();
  await expect(notice).toHaveCount(0);
});

test('a session that expires while the page is open is forgotten at once', async ({ page }) => {
  await page.clock.install();
  const { session, usage } = await authorizeInPage(page, '1 hour');

  await page.clock.fastForward(HOUR_MS + 60_000);
  await expect(session.getByRole('status').filter({ hasText: 'Your session has expired' })).toBeVisible();
  await expect(session.getByRole('button', { name: 'Sign and authorize' })).toBeVisible();
  await expect(session.getByRole('textbox', { name: 'Access token' })).toHaveCount(0);
  await expect(usage).toContainText('Authorize a session to see');
});

test('a date the ledger cannot read (five-digit year) is flagged, and the page stays up', async ({
  page,
}) => {
  const { usage } = await authorizeInPage(page);
  const to = usage.getByLabel('To (UTC)');

  // typed in the date field: month, day, then a five-digit year
  await to.focus();
  await page.keyboard.type('0101');
  await page.keyboard.type('20245');
  await expect(page.getByRole('heading', { name: '4. Usage and payments' })).toBeVisible();
  await expect(to).toHaveAttribute('max', '9999-12-31');

  // however it got there (the field was filled in, an older browser), the date is ignored and said so
  await to.fill('20245-01-01');
  await expect(to).toHaveValue('20245-01-01');
  await expect(usage.getByRole('alert')).toContainText(
    'The To date is not a day between 1970-01-01 and 9999-12-31, so it is ignored.',
  );
  await expect(to).toHaveAttribute('aria-invalid', 'true');
  await expect(page.getByRole('heading', { name: '3. Session key' })).toBeVisible();

  await usage.getByRole('button', { name: 'Clear filters' }).click();
  await expect(usage.getByRole('alert')).toHaveCount(0);
  await expect(to).toHaveValue('');
});

test('a gateway on a chain the dashboard has no definition of, with an RPC URL (CHAIN_ID 1337)', async ({
  page,
}) => {
  await alterTerms(page, (terms) => {
    terms.chainId = 1337;
    terms.network = 'eip155:1337';
    terms.domain.chainId = 1337;
  });
  await installBrowserWallet(page, { account: TEST_ACCOUNT, startChainId: 1337, rpcUrl: stack.rpcUrl });
  await page.goto(stack.gatewayUrl);
  await expect(page.getByRole('banner').getByText('eip155:1337')).toBeVisible();
  await page.getByRole('button', { name: 'Connect browser wallet' }).click();

  const wallet = page.getByRole('region', { name: '1. Wallet' });
  await expect(wallet.getByText(TEST_ACCOUNT)).toBeVisible();
  await expect(wallet).toContainText('eip155:1337');
  await expect(wallet.getByTestId('wallet-rpc-note')).toHaveCount(0);
  const account = page.getByRole('region', { name: '2. Smart account' });
  await expect(account.getByTestId('smart-account-address')).toBeVisible();
  await expect(account.getByTestId('account-deployed')).toHaveText(/^(Yes|Not yet)$/);
});

test('a gateway on a public chain the dashboard has no definition of reads it through the wallet', async ({
  page,
}) => {
  const SEPOLIA = 11_155_111;
  // what a gateway on Sepolia (CHAIN_ENVIRONMENT_FILE) publishes: no RPC URL, no faucet
  await alterTerms(page, (terms) => {
    terms.chainId = SEPOLIA;
    terms.network = `eip155:${SEPOLIA}`;
    terms.domain.chainId = SEPOLIA;
    delete terms.rpcUrl;
    delete terms.devFaucetUrl;
  });
  await installBrowserWallet(page, { account: TEST_ACCOUNT, startChainId: SEPOLIA, rpcUrl: stack.rpcUrl });
  await page.goto(stack.gatewayUrl);
  await expect(page.getByRole('banner').getByText(`eip155:${SEPOLIA}`)).toBeVisible();
  await expect(page.getByTestId('wallet-rpc-note')).toContainText('through your browser wallet');
  await page.getByRole('button', { name: 'Connect browser wallet' }).click();

  const wallet = page.getByRole('region', { name: '1. Wallet' });
  await expect(wallet.getByText(TEST_ACCOUNT)).toBeVisible();
  await expect(wallet.getByTestId('wallet-rpc-note')).toBeVisible();
  // the chain's state comes through the wallet's own RPC (here: the shim passes it to anvil)
  const account = page.getByRole('region', { name: '2. Smart account' });
  await expect(account.getByTestId('account-deployed')).toHaveText(/^(Yes|Not yet)$/);
  await expect(account.getByTestId('usdc-balance')).toContainText('USD Coin');
});

test('a page that fails to render says what failed and offers a reload, instead of going white', async ({
  page,
}) => {
  // a gateway whose terms this dashboard does not understand (another version): no `usdc`
  await alterTerms(page, (terms) => {
    delete terms.usdc;
  });
  await page.goto(stack.gatewayUrl);
  const alert = page.getByRole('alert');
  await expect(alert).toContainText('The dashboard stopped working');
  await expect(alert).toContainText("Cannot read properties of undefined (reading 'address')");

  await page.unroute('**/v1/authorize');
  await alert.getByRole('button', { name: 'Reload the page' }).click();
  await expect(page.getByRole('heading', { name: '1. Connect a wallet' })).toBeVisible();
});

test('a gateway whose longest session is under an hour is offered its maximum, less a margin', async ({
  page,
}) => {
  const MAX_SECONDS = 1_800;
  await alterTerms(page, (terms) => {
    terms.policy.expiry.maxSeconds = MAX_SECONDS;
  });
  await connectTestAccount(page);
  const session = page.getByRole('region', { name: '3. Session key' });
  const lifetime = session.getByLabel('Session lasts');
  await expect(lifetime.locator('option')).toHaveText([
    '5 minutes',
    '15 minutes',
    "30 minutes (the gateway's maximum)",
  ]);
  await expect(lifetime.locator('option:checked')).toHaveText("30 minutes (the gateway's maximum)");

  const asked = Date.now();
  await session.getByRole('button', { name: 'Sign and authorize' }).click();
  await expect(session.getByText('Session authorized')).toBeVisible();
  const stored = await page.evaluate(
    () => Object.entries(localStorage).find(([key]) => key.startsWith('paygate.session'))?.[1],
  );
  const expiresAt = Date.parse((JSON.parse(stored!) as { expiresAt: string }).expiresAt);
  // the margin keeps the expiry under the maximum, measured from when the form was signed
  expect(expiresAt).toBeLessThanOrEqual(Date.now() + (MAX_SECONDS - 25) * 1000);
  expect(expiresAt).toBeGreaterThan(asked + (MAX_SECONDS - 120) * 1000);
});
