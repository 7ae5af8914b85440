import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createWalletClient, getAddress, http } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, expect, test } from 'vitest';
import {
  createLocalChain,
  createPayerAccount,
  mintUsdc,
  testUsdcAbi,
  usdcBalance,
} from '../../devkit/chain/index.js';

const snapshotDir = mkdtempSync(join(tmpdir(), 'paygate-chain-test-'));
afterAll(() => rmSync(snapshotDir, { recursive: true, force: true }));

const stateFile = () => {
  const name = readdirSync(snapshotDir).find((file) => file.endsWith('.state.json'));
  if (!name) throw new Error('no state file cached');
  return join(snapshotDir, name);
};

test('a first chain deploys and caches its state; a second one starts from it with the same contracts', async () => {
  const first = await createLocalChain({ snapshotDir });
  const cached = statSync(stateFile()).mtimeMs;
  const second = await createLocalChain({ snapshotDir });
  try {
    expect(statSync(stateFile()).mtimeMs).toBe(cached);
    expect(second.usdc).toBe(first.usdc);
    expect(second.environment).toEqual(first.environment);
    expect(second.rpcUrl).not.toBe(first.rpcUrl);
    for (const address of [
      second.usdc,
      second.environment.DelegationManager,
      second.environment.SimpleFactory,
    ]) {
      expect(await second.publicClient.getCode({ address })).toMatch(/^0x[0-9a-f]{20,}/);
    }

    // Independent chains: a mint on one is not seen on the other.
    const holder = second.accounts.payers[0]!.address;
    await mintUsdc(second, holder, 42n);
    expect(await usdcBalance(second, holder)).toBe(42n);
    expect(await usdcBalance(first, holder)).toBe(0n);
  } finally {
    await Promise.all([first.stop(), second.stop()]);
  }
});

test('chains created at once on an empty cache all work and leave one valid snapshot', async () => {
  const racingDir = mkdtempSync(join(tmpdir(), 'paygate-chain-race-'));
  try {
    const chains = await Promise.all([1, 2, 3].map(() => createLocalChain({ snapshotDir: racingDir })));
    await Promise.all(chains.map((c) => c.stop()));
    expect(new Set(chains.map((c) => c.usdc)).size).toBe(1);
    expect(readdirSync(racingDir).sort()).toEqual([
      expect.stringMatching(/^[0-9a-f]{16}\.deployment\.json$/),
      expect.stringMatching(/^[0-9a-f]{16}\.state\.json$/),
    ]);
    const later = await createLocalChain({ snapshotDir: racingDir });
    await later.stop();
    expect(later.usdc).toBe(chains[0]?.usdc);
  } finally {
    rmSync(racingDir, { recursive: true, force: true });
  }
});

test('a chain from the snapshot keeps wall-clock time and mines every blockTime', async () => {
  const local = await createLocalChain({ snapshotDir });
  try {
    expect(local.chainId).toBe(31337);
    expect(local.chain.id).toBe(31337);
    const start = await local.publicClient.getBlock();
    expect(Number(start.timestamp)).toBeGreaterThan(Date.now() / 1000 - 30);
    expect(Number(start.timestamp)).toBeLessThan(Date.now() / 1000 + 30);
    await local.testClient.mine({ blocks: 1 });
    expect(await local.publicClient.getBlockNumber()).toBeGreaterThan(start.number);
  } finally {
    await local.stop();
  }
});

test('a corrupt cached state is rebuilt instead of failing', async () => {
  writeFileSync(stateFile(), '{"not":"a state"}');
  const local = await createLocalChain({ snapshotDir });
  try {
    expect(await local.publicClient.getCode({ address: local.usdc })).toBeTruthy();
    expect(statSync(stateFile()).size).toBeGreaterThan(1000);
  } finally {
    await local.stop();
  }
});

test('the role accounts are anvil’s funded dev accounts, and the deployer owns the USDC', async () => {
  const local = await createLocalChain({ snapshotDir });
  try {
    const { deployer, gateway, treasury, payers } = local.accounts;
    const keys = [deployer, gateway, treasury, ...payers];
    expect(new Set(keys.map((k) => k.address)).size).toBe(keys.length);
    for (const key of keys) expect(privateKeyToAccount(key.privateKey).address).toBe(key.address);
    const anvilAccounts = await createWalletClient({ transport: http(local.rpcUrl) }).getAddresses();
    expect(keys.map((k) => k.address)).toEqual(anvilAccounts.map((a) => getAddress(a)));
    expect(await local.publicClient.getBalance({ address: gateway.address })).toBeGreaterThan(10n ** 21n);
    expect(
      await local.publicClient.readContract({ address: local.usdc, abi: testUsdcAbi, functionName: 'owner' }),
    ).toBe(deployer.address);
  } finally {
    await local.stop();
  }
});

test('payer accounts: counterfactual until deployed, funded with USDC and ETH, deploy() idempotent', async () => {
  const local = await createLocalChain({ snapshotDir });
  try {
    const ownerKey = local.accounts.payers[2]!.privateKey;
    const payer = await createPayerAccount(local, ownerKey, {
      deploy: false,
      fundUsdc: 3_000_000n,
      fundEth: 5n,
    });
    expect(payer.owner.address).toBe(local.accounts.payers[2]!.address);
    expect(await local.publicClient.getCode({ address: payer.address })).toBeUndefined();
    expect(await usdcBalance(local, payer.address)).toBe(3_000_000n);
    expect(await local.publicClient.getBalance({ address: payer.address })).toBe(5n);

    await payer.deploy();
    await payer.deploy();
    expect(await local.publicClient.getCode({ address: payer.address })).toBeTruthy();
    expect(await payer.account.isDeployed()).toBe(true);

    const again = await createPayerAccount(local, ownerKey);
    expect(again.address).toBe(payer.address);
  } finally {
    await local.stop();
  }
});

test('Multicall3 answers at its canonical address, so viem batches reads as on Base', async () => {
  const local = await createLocalChain({ snapshotDir });
  try {
    const holder = local.accounts.payers[0]!.address;
    await mintUsdc(local, holder, 7n);
    const token = { address: local.usdc, abi: testUsdcAbi } as const;
    const results = await local.publicClient.multicall({
      contracts: [
        { ...token, functionName: 'decimals' },
        { ...token, functionName: 'balanceOf', args: [holder] },
        { ...token, functionName: 'mint', args: [holder, 1n] },
      ],
    });
    expect(results.map((r) => r.status)).toEqual(['success', 'success', 'failure']);
    expect(results[1]?.result).toBe(7n);
  } finally {
    await local.stop();
  }
});

test('stop() kills the chain’s anvil', async () => {
  const local = await createLocalChain({ snapshotDir });
  await local.stop();
  expect(() => process.kill(local.pid, 0)).toThrow(expect.objectContaining({ code: 'ESRCH' }));
  await expect(local.publicClient.getBlockNumber()).rejects.toThrow();
});
