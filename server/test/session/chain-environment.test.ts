import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getAddress } from 'viem';
import { afterAll, describe, expect, test } from 'vitest';
import { buildApp } from '../../src/app.js';
import { ConfigError, loadConfig } from '../../src/config.js';
import { delegationEnvironment } from '../../src/payments/chain/chain-client.js';
import { testConfig } from '../support/config.js';

const dir = mkdtempSync(join(tmpdir(), 'paygate-environment-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const localEnv = {
  CHAIN_RPC_URL: 'http://127.0.0.1:9',
  CHAIN_ID: '31337',
  USDC_ADDRESS: '0x00000000000000000000000000000000000000bb',
  TREASURY_ADDRESS: '0x00000000000000000000000000000000000000aa',
  SESSION_KEY_PRIVATE_KEY: `0x${'11'.repeat(32)}`,
  JWT_SECRET: 'a'.repeat(32),
};

const environment = {
  DelegationManager: '0x9e545e3c0baab3e08cdfd552c960a1050f373042',
  EntryPoint: '0x1613beb3b2c4f22ee086b2b38c1476a3ce7f78e8',
  SimpleFactory: '0xe7f1725e7734ce288f8367e1bb143e90bb3f0512',
  implementations: { HybridDeleGatorImpl: '0xf5059a5d33d5853360d16c683c16e67980206f36' },
  caveatEnforcers: { TimestampEnforcer: '0x2279b7a0a67db372996a5fab50d91eaa73d2ebe6' },
};

function file(name: string, contents: string): string {
  const path = join(dir, name);
  writeFileSync(path, contents);
  return path;
}

describe('CHAIN_ENVIRONMENT_FILE', () => {
  test('reads an environment, or the local chain kit’s {usdc, environment} file', () => {
    for (const contents of [environment, { usdc: localEnv.USDC_ADDRESS, environment }]) {
      const config = loadConfig({
        ...localEnv,
        CHAIN_ENVIRONMENT_FILE: file('environment.json', JSON.stringify(contents)),
      });
      expect(config.chain.delegationEnvironment).toEqual(environment);
      expect(delegationEnvironment(config.chain).DelegationManager).toBe(
        getAddress(environment.DelegationManager),
      );
    }
  });

  test.each([
    ['a missing file', join(dir, 'absent.json')],
    ['not JSON', () => file('broken.json', '{')],
    ['no addresses', () => file('empty.json', '{"DelegationManager": "nope", "caveatEnforcers": {}}')],
  ])('refuses %s, naming the variable', (_case, path) => {
    const CHAIN_ENVIRONMENT_FILE = typeof path === 'function' ? path() : path;
    expect(() => loadConfig({ ...localEnv, CHAIN_ENVIRONMENT_FILE })).toThrow(ConfigError);
    expect(() => loadConfig({ ...localEnv, CHAIN_ENVIRONMENT_FILE })).toThrow(/CHAIN_ENVIRONMENT_FILE/);
  });

  test('DELEGATION_MANAGER_ADDRESS overrides the manager of the environment', () => {
    const config = loadConfig({
      ...localEnv,
      CHAIN_ENVIRONMENT_FILE: file('environment.json', JSON.stringify(environment)),
      DELEGATION_MANAGER_ADDRESS: '0x00000000000000000000000000000000000000cc',
    });
    expect(delegationEnvironment(config.chain).DelegationManager).toBe(
      getAddress('0x00000000000000000000000000000000000000cc'),
    );
  });

  test('a chain the kit does not know, without the file, stops start-up with the variable named', async () => {
    const base = testConfig();
    const config = testConfig({ chain: { ...base.chain, delegationEnvironment: undefined } });
    await expect(buildApp(config)).rejects.toThrow(/CHAIN_ENVIRONMENT_FILE is required on chain 31337/);
  });

  test('on Base the kit’s deployment is used', () => {
    const environmentOnBase = delegationEnvironment({
      ...testConfig().chain,
      chainId: 8453,
      delegationEnvironment: undefined,
    });
    expect(environmentOnBase.caveatEnforcers.ERC20TransferAmountEnforcer).toMatch(/^0x[0-9a-fA-F]{40}$/);
  });
});
