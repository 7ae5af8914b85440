import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Implementation, toMetaMaskSmartAccount } from '@metamask/smart-accounts-kit';
import OpenAI from 'openai';
import { type Address, parseEther, parseUnits } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { usdcBalance } from '../../devkit/chain/index.js';
import { type LocalStack, startLocalStack } from '../../devkit/stack/local-stack.js';
import { buildApp } from '../../src/app.js';
import { alive } from './processes.js';

function postJson(url: string, body: unknown, headers: Record<string, string> = {}) {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
}

const freshAddress = (): Address => privateKeyToAccount(generatePrivateKey()).address;

describe('a running local stack', () => {
  let stack: LocalStack;
  beforeAll(async () => {
    stack = await startLocalStack({ port: 0, tempDataDir: true });
  });
  afterAll(() => stack?.stop());

  test('the gateway answers /health and lists the catalog, simulated OpenAI-compatible model included', async () => {
    const health = await fetch(`${stack.gatewayUrl}/health`);
    expect(health.status).toBe(200);
    expect((await health.json()).data.status).toBe('ok');

    const client = new OpenAI({ baseURL: `${stack.gatewayUrl}/v1`, apiKey: 'none' });
    const ids = [];
    for await (const model of client.models.list()) ids.push(model.id);
    expect(ids).toEqual(
      expect.arrayContaining([
        'anthropic/claude-sonnet-5.5',
        'google/gemini-3.8-flash',
        'openai/gpt-4o-mini',
      ]),
    );
  });

  test('the terms tell the dashboard where the faucet and the RPC are; a gateway without DEV_FAUCET_URL does not', async () => {
    const res = await fetch(`${stack.gatewayUrl}/v1/authorize`);
    expect(res.status).toBe(200);
    const terms = (await res.json()).data;
    expect(terms).toMatchObject({
      chainId: 31337,
      devFaucetUrl: stack.faucetUrl,
      rpcUrl: stack.rpcUrl,
      sessionKey: stack.sessionKeyAddress,
      treasury: stack.treasury,
      delegationManager: stack.delegationManager,
      environment: JSON.parse(JSON.stringify(stack.environment)),
    });

    const product = await buildApp({ ...stack.config, devFaucetUrl: undefined, databaseUrl: ':memory:' });
    try {
      const plain = (await product.inject({ method: 'GET', url: '/v1/authorize' })).json().data;
      expect(plain.chainId).toBe(31337);
      expect(plain).not.toHaveProperty('devFaucetUrl');
      expect(plain).not.toHaveProperty('rpcUrl');
    } finally {
      await product.close();
    }
  });

  test('local-stack.json holds the facts, and they are true on chain', async () => {
    const facts = JSON.parse(await readFile(stack.factsPath, 'utf8'));
    expect(stack.factsPath.startsWith(stack.dataDir)).toBe(true);
    expect(facts).toEqual({
      gatewayUrl: stack.gatewayUrl,
      dashboardUrl: stack.dashboardUrl,
      graphqlUrl: `${stack.gatewayUrl}/graphql`,
      rpcUrl: stack.rpcUrl,
      chainId: 31337,
      usdc: stack.chain.usdc,
      delegationManager: stack.chain.environment.DelegationManager,
      environment: JSON.parse(JSON.stringify(stack.chain.environment)),
      treasury: stack.chain.accounts.treasury.address,
      sessionKeyAddress: stack.chain.accounts.gateway.address,
      faucetUrl: stack.faucetUrl,
      simulators: stack.simulators,
      // No provider key or base URL given: every family is simulated.
      providers: {
        anthropic: { baseUrl: stack.simulators.anthropic, simulated: true },
        gemini: { baseUrl: stack.simulators.gemini, simulated: true },
      },
      testOwners: stack.testOwners,
      pid: process.pid,
      anvilPid: stack.chain.pid,
      databaseUrl: stack.databaseUrl,
      startedAt: expect.any(String),
    });
    expect(facts.gatewayUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(stack.config.chain.rpcUrl).toBe(facts.rpcUrl);
    expect(stack.config.devFaucetUrl).toBe(facts.faucetUrl);

    const { publicClient } = stack.chain;
    expect(await publicClient.getChainId()).toBe(facts.chainId);
    expect(await publicClient.getCode({ address: facts.usdc })).toMatch(/^0x.{10,}/);
    expect(await publicClient.getCode({ address: facts.delegationManager })).toMatch(/^0x.{10,}/);

    expect(facts.testOwners).toHaveLength(3);
    for (const owner of facts.testOwners) {
      expect(privateKeyToAccount(owner.privateKey).address).toBe(owner.address);
      expect(await publicClient.getCode({ address: owner.smartAccount })).toMatch(/^0x.{10,}/);
      expect(await usdcBalance(stack.chain, owner.smartAccount)).toBe(parseUnits('1000', 6));
      expect(await usdcBalance(stack.chain, owner.address)).toBe(parseUnits('1000', 6));
    }
  });

  test('the faucet mints USDC and adds ETH, concurrent grants to one address included', async () => {
    const address = freshAddress();
    const grants = await Promise.all([
      postJson(`${stack.faucetUrl}/fund`, { address, usdc: '12.5', eth: '0.25' }),
      postJson(`${stack.faucetUrl}/fund`, { address, usdc: '0.000001', eth: '0.75' }),
    ]);
    const [grant] = grants;
    expect(grants.map((res) => res.status)).toEqual([200, 200]);
    const first = (await (grant as Response).json()).data;
    expect(first).toMatchObject({
      address,
      usdc: '12.5',
      eth: '0.25',
      mintTx: expect.stringMatching(/^0x[0-9a-f]{64}$/),
    });

    expect(await usdcBalance(stack.chain, address)).toBe(12_500_001n);
    expect(await stack.chain.publicClient.getBalance({ address })).toBe(parseEther('1'));
  });

  test('the faucet defaults to 100 USDC and 1 ETH', async () => {
    const address = freshAddress();
    const res = await postJson(`${stack.faucetUrl}/fund`, { address });
    expect(res.status).toBe(200);
    expect((await res.json()).data).toMatchObject({ usdcBalance: '100', ethBalance: '1' });
    expect(await usdcBalance(stack.chain, address)).toBe(parseUnits('100', 6));
  });

  test('the faucet answers browsers from another origin (CORS preflight)', async () => {
    const res = await fetch(`${stack.faucetUrl}/fund`, {
      method: 'OPTIONS',
      headers: {
        origin: 'http://127.0.0.1:5173',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type',
      },
    });
    expect(res.status).toBeLessThan(300);
    expect(res.headers.get('access-control-allow-origin')).toBe('http://127.0.0.1:5173');
  });

  test('the faucet refuses bad input with 400 naming the field, and moves nothing', async () => {
    const address = freshAddress();
    const cases: Array<[unknown, string]> = [
      [{ address: '0x1234' }, 'address'],
      [{ usdc: '5' }, 'address'],
      [{ address, usdc: '-5' }, 'usdc'],
      [{ address, usdc: '1.1234567' }, 'usdc'],
      [{ address, usdc: 5 }, 'usdc'],
      [{ address, eth: '1e3' }, 'eth'],
    ];
    for (const [body, field] of cases) {
      const res = await postJson(`${stack.faucetUrl}/fund`, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect((await res.json()).error).toMatchObject({ code: 'validation_error', field });
    }
    expect(await usdcBalance(stack.chain, address)).toBe(0n);
  });

  test('the faucet deploys a smart account from its factory data, once', async () => {
    const owner = privateKeyToAccount(generatePrivateKey());
    const account = await toMetaMaskSmartAccount({
      client: stack.chain.publicClient,
      implementation: Implementation.Hybrid,
      deployParams: [owner.address, [], [], []],
      deploySalt: '0x',
      signer: { account: owner },
      environment: stack.chain.environment,
    });
    const { factory, factoryData } = await account.getFactoryArgs();
    const body = { address: account.address, factory, factoryData };

    const wrongFactory = await postJson(`${stack.faucetUrl}/deploy-smart-account`, {
      ...body,
      factory: stack.chain.usdc,
    });
    expect(wrongFactory.status).toBe(400);
    expect((await wrongFactory.json()).error.field).toBe('factory');
    expect(await stack.chain.publicClient.getCode({ address: account.address })).toBeUndefined();

    const deployed = await postJson(`${stack.faucetUrl}/deploy-smart-account`, body);
    expect(deployed.status).toBe(200);
    expect((await deployed.json()).data).toMatchObject({ address: account.address, deployed: true });
    expect(await stack.chain.publicClient.getCode({ address: account.address })).toMatch(/^0x.{10,}/);

    const again = await postJson(`${stack.faucetUrl}/deploy-smart-account`, body);
    expect((await again.json()).data).toEqual({ address: account.address, deployed: false, txHash: null });

    const otherAccount = freshAddress();
    const mismatch = await postJson(`${stack.faucetUrl}/deploy-smart-account`, {
      ...body,
      address: otherAccount,
    });
    expect(mismatch.status).toBe(400);
    expect((await mismatch.json()).error.field).toBe('factoryData');
  });
});

describe('stop()', () => {
  test('stops the gateway, the faucet and anvil, and removes the temporary data directory', async () => {
    const stack = await startLocalStack({ port: 0, tempDataDir: true, testOwners: 1 });
    expect(alive(stack.anvilPid)).toBe(true);
    expect(existsSync(stack.factsPath)).toBe(true);

    await stack.stop();

    expect(alive(stack.anvilPid)).toBe(false);
    await expect(fetch(`${stack.gatewayUrl}/health`)).rejects.toThrow();
    await expect(postJson(`${stack.faucetUrl}/fund`, { address: freshAddress() })).rejects.toThrow();
    await expect(fetch(stack.rpcUrl)).rejects.toThrow();
    await expect(fetch(stack.simulators.anthropic)).rejects.toThrow();
    expect(existsSync(stack.dataDir)).toBe(false);
    await stack.stop(); // a second stop is harmless
  });

  test('with a kept data directory, a stale database is not reused and stop() removes only the facts', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'paygate-stack-test-'));
    try {
      const stale = join(dataDir, 'local-stack.sqlite');
      await writeFile(stale, 'a ledger of a chain that no longer exists');
      const stack = await startLocalStack({ port: 0, dataDir, testOwners: 1 });
      expect(stack.databaseUrl).toBe(stale);
      expect(stack.factsPath).toBe(join(dataDir, 'local-stack.json'));
      const left = existsSync(stale) ? await readFile(stale, 'utf8') : '';
      expect(left).not.toContain('no longer exists');
      await stack.stop();
      expect(existsSync(stack.factsPath)).toBe(false);
      expect(existsSync(dataDir)).toBe(true);
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
