import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, describe, expect, test } from 'vitest';
import { loadConfig } from '../../src/config.js';
import {
  type GatewayUnderTest,
  sessionGatewayConfig,
  startGateway,
  temporaryDatabase,
  withSessionStack,
} from '../session/harness.js';
import { parseExposition, sampleValue } from './prometheus-text.js';

// 1 ETH at anvil's gas price (about 1 gwei) pays about 4,000 settlements of 250,000 gas.
const RELAYER_BALANCE_WEI = 10n ** 18n;
const relayerKey = generatePrivateKey();
const relayer = privateKeyToAccount(relayerKey).address;

const started: Array<{ gateway: GatewayUnderTest; database: ReturnType<typeof temporaryDatabase> }> = [];
let startRelayerGateway: (minSettlementsLeft?: number) => Promise<GatewayUnderTest>;
withSessionStack(async ({ local, anthropic }) => {
  await local.testClient.setBalance({ address: relayer, value: RELAYER_BALANCE_WEI });
  startRelayerGateway = async (relayerMinSettlementsLeft) => {
    const database = temporaryDatabase();
    const config = sessionGatewayConfig(local, anthropic, {
      databaseUrl: database.url,
      limits: { relayerMinSettlementsLeft },
    });
    // The core checks (`{}`), the relayer's among them; its own key, holding RELAYER_BALANCE_WEI.
    const gateway = await startGateway(
      { ...config, chain: { ...config.chain, sessionKeyPrivateKey: relayerKey } },
      {},
    );
    started.push({ gateway, database });
    return gateway;
  };
});
afterAll(async () => {
  for (const { gateway, database } of started) {
    await gateway.close();
    database.remove();
  }
});

async function health(gateway: GatewayUnderTest) {
  const res = await gateway.app.inject({ method: 'GET', url: '/health' });
  expect(res.statusCode).toBe(200);
  return res.json().data;
}

describe("/health and the relayer's runway", () => {
  test('enough ETH for RELAYER_MIN_SETTLEMENTS_LEFT (default 1000): the relayer is up, its runway stated', async () => {
    const gateway = await startRelayerGateway();
    const data = await health(gateway);
    expect(data.status).toBe('ok');
    const { status, state, detail } = data.dependencies.relayer;
    expect(status, detail).toBe('up');
    expect(state).toMatchObject({
      address: relayer,
      balanceWei: RELAYER_BALANCE_WEI.toString(),
      settlementGas: '250000',
      minSettlementsLeft: 1000,
    });
    expect(state.settlementsLeft).toBe(Number(RELAYER_BALANCE_WEI / (250_000n * BigInt(state.gasPriceWei))));
    expect(state.settlementsLeft).toBeGreaterThan(1000);
    expect(detail).toMatch(/^1 ETH: about \d+ settlements of 250000 gas at [\d.]+ gwei$/);

    const samples = parseExposition((await gateway.app.inject({ method: 'GET', url: '/metrics' })).body);
    expect(sampleValue(samples, 'paygate_relayer_balance_wei')).toBe(Number(RELAYER_BALANCE_WEI));
    expect(sampleValue(samples, 'paygate_relayer_settlements_left')).toBeGreaterThan(1000);
  });

  test('a threshold above the settlements left: a warning naming the variable and the address to fund, the gateway still ok', async () => {
    const gateway = await startRelayerGateway(1_000_000);
    const data = await health(gateway);
    expect(data.status).toBe('ok');
    const { status, state, detail } = data.dependencies.relayer;
    expect(status).toBe('warning');
    expect(state.settlementsLeft).toBeLessThan(1_000_000);
    expect(detail).toContain('fewer than RELAYER_MIN_SETTLEMENTS_LEFT (1000000)');
    expect(detail).toContain(`send ETH to ${relayer}`);
    // Anyone but the operator sees the status only.
    const outside = await gateway.app.inject({ method: 'GET', url: '/health', remoteAddress: '203.0.113.7' });
    expect(outside.json().data.dependencies.relayer).toEqual({ status: 'warning' });
  });

  test('RELAYER_MIN_SETTLEMENTS_LEFT is read from the environment, and refused when not a whole number', () => {
    const env = {
      JWT_SECRET: 'j'.repeat(32),
      CHAIN_RPC_URL: 'https://mainnet.base.org',
      TREASURY_ADDRESS: '0x00000000000000000000000000000000000000aa',
      SESSION_KEY_PRIVATE_KEY: relayerKey,
    };
    expect(loadConfig(env).limits.relayerMinSettlementsLeft).toBe(1000);
    expect(loadConfig({ ...env, RELAYER_MIN_SETTLEMENTS_LEFT: '25' }).limits.relayerMinSettlementsLeft).toBe(
      25,
    );
    expect(() => loadConfig({ ...env, RELAYER_MIN_SETTLEMENTS_LEFT: 'lots' })).toThrow(
      'RELAYER_MIN_SETTLEMENTS_LEFT must be a whole number, got "lots"',
    );
  });
});
