import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { createPublicClient, http } from 'viem';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { type AnvilProcess, startAnvil } from '../../devkit/chain/index.js';
import { buildApp } from '../../src/app.js';
import { ConfigError, type GatewayConfig } from '../../src/config.js';
import { chainRpcCheck } from '../../src/http/health-checks.js';
import { GATEWAY_VERSION } from '../../src/version.js';
import { testConfig } from '../support/config.js';

const CLOSED_PORT_URL = 'http://127.0.0.1:9';
const closers: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});

/**
 * A JSON-RPC endpoint that knows only eth_blockNumber and eth_chainId (the test config's chain
 * unless `chain.id` is changed), and counts the calls.
 */
async function blockNumberRpc(block: number) {
  const calls = { count: 0 };
  const chain = { id: testConfig().chain.chainId };
  const results: Record<string, () => number> = { eth_blockNumber: () => block, eth_chainId: () => chain.id };
  const server = createServer(async (req, res) => {
    let raw = '';
    for await (const chunk of req) raw += chunk;
    const { id, method } = JSON.parse(raw);
    calls.count++;
    res.setHeader('content-type', 'application/json');
    const result = results[method]?.();
    res.end(
      JSON.stringify(
        result === undefined
          ? { jsonrpc: '2.0', id, error: { code: -32601, message: 'method not found' } }
          : { jsonrpc: '2.0', id, result: `0x${result.toString(16)}` },
      ),
    );
  });
  return { url: await listen(server), calls, chain };
}

/** Accepts connections and never answers. */
async function silentRpc() {
  return listen(createServer(() => {}));
}

async function listen(server: Server): Promise<string> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  closers.push(() => {
    server.closeAllConnections();
    return new Promise((resolve) => server.close(resolve));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function health(overrides: Partial<GatewayConfig>) {
  const app: FastifyInstance = await buildApp(testConfig(overrides));
  closers.push(() => app.close());
  const res = await app.inject({ method: 'GET', url: '/health' });
  expect(res.statusCode).toBe(200);
  return res.json().data;
}

const chainAt = (rpcUrl: string) => ({ chain: { ...testConfig().chain, rpcUrl } });

describe('GET /health', () => {
  test('is ok with version, uptime and each dependency when the chain answers', async () => {
    const rpc = await blockNumberRpc(1234);
    const data = await health(chainAt(rpc.url));
    expect(data).toMatchObject({
      status: 'ok',
      version: GATEWAY_VERSION,
      uptimeSeconds: expect.any(Number),
      dependencies: {
        chain: { status: 'up', detail: 'block 1234' },
        anthropic: { status: 'up' },
        google: { status: 'up' },
      },
    });
    expect(data.uptimeSeconds).toBeGreaterThanOrEqual(0);
  });

  test('is degraded when the chain RPC refuses connections, without naming the RPC URL', async () => {
    const data = await health(chainAt(CLOSED_PORT_URL));
    expect(data.status).toBe('degraded');
    expect(data.dependencies.chain.status).toBe('down');
    expect(JSON.stringify(data)).not.toContain('127.0.0.1:9');
  });

  test('a provider with neither key nor own base URL is unconfigured, which does not degrade', async () => {
    const rpc = await blockNumberRpc(1);
    const data = await health({
      ...chainAt(rpc.url),
      providers: {
        anthropic: { baseUrl: 'https://api.anthropic.com' },
        google: { baseUrl: 'http://127.0.0.1:4010' },
      },
    });
    expect(data.status).toBe('ok');
    expect(data.dependencies.anthropic).toEqual({
      status: 'unconfigured',
      detail: 'set ANTHROPIC_API_KEY to serve its models',
    });
    expect(data.dependencies.google).toEqual({ status: 'up' });
  });

  test('the dependency checks given to buildApp replace the core ones', async () => {
    const data = await health({});
    expect(Object.keys(data.dependencies)).toEqual(expect.arrayContaining(['chain', 'anthropic', 'google']));
    const app = await buildApp(testConfig(), {
      checks: [
        { name: 'store', critical: true, check: async () => ({ status: 'up' }) },
        { name: 'flaky', critical: false, check: async () => Promise.reject(new Error('boom')) },
      ],
    });
    closers.push(() => app.close());
    const res = await app.inject({ method: 'GET', url: '/health' });
    expect(res.json().data).toMatchObject({
      status: 'ok',
      dependencies: { store: { status: 'up' }, flaky: { status: 'down', detail: 'boom' } },
    });
    expect(res.json().data.dependencies.chain).toBeUndefined();
  });
});

describe('GET /health for whom', () => {
  const checks = [
    {
      name: 'collector',
      critical: false,
      check: async () => ({
        status: 'up' as const,
        detail: '0 idle debts collected; 1 payers failing',
        state: { failing: [{ payer: '0x93f2000000000000000000000000000000009bcf', lastError: 'less USDC' }] },
      }),
    },
    {
      name: 'database',
      critical: true,
      check: async () => Promise.reject(new Error('getaddrinfo ENOTFOUND db.internal')),
    },
  ];
  const adminToken = 'admin-token-0123456789';
  async function healthAs(remoteAddress: string, overrides: Partial<GatewayConfig>, authorization?: string) {
    const app = await buildApp(testConfig(overrides), { checks });
    closers.push(() => app.close());
    const res = await app.inject({
      method: 'GET',
      url: '/health',
      remoteAddress,
      headers: authorization ? { authorization } : {},
    });
    return res.json().data;
  }
  const statusesOnly = { collector: { status: 'up' }, database: { status: 'down' } };

  test('anyone else sees the statuses only: no payer, no failure reason, no database host', async () => {
    const data = await healthAs('203.0.113.7', {});
    expect(data).toMatchObject({ status: 'degraded', dependencies: statusesOnly });
    expect(JSON.stringify(data)).not.toMatch(/0x93f2|less USDC|db\.internal/);
    // With tokens set, a caller on this machine without one is anyone else too.
    expect((await healthAs('127.0.0.1', { adminToken })).dependencies).toEqual(statusesOnly);
  });

  test('the operator (ADMIN_TOKEN or METRICS_TOKEN; this machine when none is set) sees details and state', async () => {
    for (const data of [
      await healthAs('203.0.113.7', { adminToken }, `Bearer ${adminToken}`),
      await healthAs('127.0.0.1', {}),
    ]) {
      expect(data.dependencies.collector.state.failing[0].payer).toBe(
        '0x93f2000000000000000000000000000000009bcf',
      );
      expect(data.dependencies.database.detail).toBe('getaddrinfo ENOTFOUND db.internal');
    }
  });
});

describe('the chain RPC check', () => {
  const client = (url: string) =>
    createPublicClient({ transport: http(url, { timeout: 1000, retryCount: 0 }), cacheTime: 0 });

  const chainId = testConfig().chain.chainId;

  test('keeps its answer for the cache period: many probes, one round of calls (block and chain id)', async () => {
    const rpc = await blockNumberRpc(7);
    const check = chainRpcCheck(client(rpc.url), chainId, { cacheMs: 60_000 });
    const states = await Promise.all([check.check(), check.check(), check.check()]);
    await check.check();
    expect(states).toEqual(Array(3).fill({ status: 'up', detail: 'block 7' }));
    expect(rpc.calls.count).toBe(2);
  });

  test('asks again once the cache period is over', async () => {
    const rpc = await blockNumberRpc(7);
    const check = chainRpcCheck(client(rpc.url), chainId, { cacheMs: 0 });
    await check.check();
    await check.check();
    expect(rpc.calls.count).toBe(4);
  });

  test('reports a node on another chain than CHAIN_ID as down, naming both ids and not the RPC URL', async () => {
    const rpc = await blockNumberRpc(7);
    rpc.chain.id = 84532;
    const state = await chainRpcCheck(client(rpc.url), 8453).check();
    expect(state).toEqual({ status: 'down', detail: 'the node is on chain 84532, not CHAIN_ID 8453' });
  });

  test('/health is degraded once the node behind CHAIN_RPC_URL is on another chain than at start-up', async () => {
    const rpc = await blockNumberRpc(7);
    const app = await buildApp(testConfig(chainAt(rpc.url)));
    closers.push(() => app.close());
    // Re-pointed behind the same URL (a load balancer, a DNS change) after the gateway started.
    rpc.chain.id = 84532;
    const res = await app.inject({ method: 'GET', url: '/health' });
    expect(res.json().data).toMatchObject({
      status: 'degraded',
      dependencies: {
        chain: { status: 'down', detail: `the node is on chain 84532, not CHAIN_ID ${chainId}` },
      },
    });
    expect(res.body).not.toContain(new URL(rpc.url).host);
  });

  test('reports a hung RPC as down instead of hanging the probe', async () => {
    const data = await health(chainAt(await silentRpc()));
    expect(data.status).toBe('degraded');
    expect(data.dependencies.chain).toEqual({
      status: 'down',
      detail: 'The request took too long to respond.',
    });
  });

  test('reports a WebSocket RPC that never completes its handshake as down instead of hanging the probe', async () => {
    const server = createServer(() => {});
    const held: Socket[] = [];
    // The connection is taken, the handshake never answered.
    server.on('upgrade', (_request, socket: Socket) => held.push(socket));
    closers.push(async () => {
      for (const socket of held) socket.destroy();
    });
    const url = (await listen(server)).replace('http:', 'ws:');
    const data = await health(chainAt(url));
    expect(data.dependencies.chain).toEqual({
      status: 'down',
      detail: 'The request took too long to respond.',
    });
  });

  test('reports an RPC that is not a chain as down', async () => {
    const server = createServer((_req, res) => {
      res.statusCode = 502;
      res.end('bad gateway');
    });
    const check = chainRpcCheck(client(await listen(server)), chainId);
    expect(await check.check()).toMatchObject({ status: 'down', detail: 'HTTP request failed.' });
  });
});

describe('start-up against the node behind CHAIN_RPC_URL', () => {
  let anvil: AnvilProcess;
  beforeAll(async () => {
    anvil = await startAnvil();
  });
  afterAll(() => anvil?.stop());

  test('a node on another chain than CHAIN_ID stops start-up, naming CHAIN_ID and both ids, not the URL', async () => {
    // Base Sepolia's node (here anvil, chain 31337) with CHAIN_ID left at Base's.
    const config = testConfig({ chain: { ...testConfig().chain, rpcUrl: anvil.rpcUrl, chainId: 8453 } });
    const refused = await buildApp(config).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(ConfigError);
    expect((refused as ConfigError).message).toBe(
      'Invalid configuration: CHAIN_ID is 8453, but the node at CHAIN_RPC_URL is on chain 31337: point CHAIN_RPC_URL at a node of chain 8453, or set CHAIN_ID to 31337',
    );
  });

  test('a node on the chain CHAIN_ID names starts, and /health reports it up', async () => {
    const data = await health(chainAt(anvil.rpcUrl));
    expect(data.dependencies.chain).toEqual({ status: 'up', detail: expect.stringMatching(/^block \d+$/) });
  });

  test('a node that cannot be reached at start-up does not stop it: the chain may come later', async () => {
    const data = await health({ chain: { ...testConfig().chain, rpcUrl: CLOSED_PORT_URL, chainId: 8453 } });
    expect(data.dependencies.chain.status).toBe('down');
  });
});
