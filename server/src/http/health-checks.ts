import type { Redis } from 'ioredis';
import { createPublicClient, http, type PublicClient, TimeoutError, webSocket } from 'viem';
import {
  DEFAULT_ANTHROPIC_BASE_URL,
  DEFAULT_GEMINI_BASE_URL,
  type GatewayConfig,
  type UpstreamConfig,
} from '../config.js';
import { chainErrorReason } from '../payments/chain-client.js';
import type { DependencyCheck, DependencyState } from './health-route.js';

/** The probes of the core: the chain RPC, each built-in provider, and Redis when it is used. */
export function coreHealthChecks(
  config: GatewayConfig,
  { redis }: { redis?: Redis } = {},
): DependencyCheck[] {
  return [
    chainRpcCheck(probeClient(config.chain.rpcUrl), config.chain.chainId),
    providerCheck('anthropic', config.providers.anthropic, DEFAULT_ANTHROPIC_BASE_URL, 'ANTHROPIC_API_KEY'),
    providerCheck('google', config.providers.google, DEFAULT_GEMINI_BASE_URL, 'GEMINI_API_KEY'),
    ...(redis ? [redisCheck(redis)] : []),
  ];
}

/** What the chain probes read: the head, and which chain the node is on. */
export type ChainProbe = Pick<PublicClient, 'getBlockNumber' | 'getChainId'>;

/**
 * A client of its own, so a slow RPC fails the probe fast instead of waiting on retries. Each call
 * is bounded here too: a WebSocket transport opens its socket before its request timeout starts,
 * and the socket has no timeout of its own (a node accepting the connection and never answering
 * would hold the probe, or the start-up, forever).
 */
export function probeClient(rpcUrl: string, timeoutMs = 1000): ChainProbe {
  const options = { timeout: timeoutMs, retryCount: 0 };
  const transport = /^wss?:/.test(rpcUrl) ? webSocket(rpcUrl, options) : http(rpcUrl, options);
  const client = createPublicClient({ transport, cacheTime: 0 });
  return {
    getBlockNumber: () => answeredWithin(timeoutMs, client.getBlockNumber()),
    getChainId: () => answeredWithin(timeoutMs, client.getChainId()),
  };
}

/** `call`, or viem's TimeoutError once `ms` have passed (its URL left out: it may carry a key). */
async function answeredWithin<T>(ms: number, call: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TimeoutError({ body: {}, url: 'CHAIN_RPC_URL' })), ms);
  });
  try {
    return await Promise.race([call, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Critical: settlements need the chain, the one CHAIN_ID names. The answer (up or down) is kept for
 * `cacheMs` and concurrent probes share one round of calls, so a load balancer probing often costs
 * two RPC calls per period.
 */
export function chainRpcCheck(
  client: ChainProbe,
  chainId: number,
  { cacheMs = 5000 }: { cacheMs?: number } = {},
): DependencyCheck {
  let last: { at: number; state: Promise<DependencyState> } | undefined;
  const probe = async (): Promise<DependencyState> => {
    try {
      const [block, nodeChainId] = await Promise.all([client.getBlockNumber(), client.getChainId()]);
      // Every settlement and x402 proof would be signed for the wrong chain, and fail.
      if (nodeChainId !== chainId)
        return { status: 'down', detail: `the node is on chain ${nodeChainId}, not CHAIN_ID ${chainId}` };
      return { status: 'up', detail: `block ${block}` };
    } catch (error) {
      // The RPC URL may carry an API key: say what failed, never where.
      return { status: 'down', detail: chainErrorReason(error) };
    }
  };
  return {
    name: 'chain',
    critical: true,
    check() {
      const now = Date.now();
      if (!last || now - last.at >= cacheMs) last = { at: now, state: probe() };
      return last.state;
    },
  };
}

/** Not critical, and no network call: a provider is usable once it has a key or a custom endpoint. */
export function providerCheck(
  name: string,
  upstream: UpstreamConfig,
  defaultBaseUrl: string,
  keyVariable: string,
): DependencyCheck {
  const configured = upstream.apiKey !== undefined || upstream.baseUrl !== defaultBaseUrl;
  const state: DependencyState = configured
    ? { status: 'up' }
    : { status: 'unconfigured', detail: `set ${keyVariable} to serve its models` };
  return { name, critical: false, check: async () => state };
}

/** Not critical: rate limits are skipped while Redis is away. The client's own state, no round trip. */
export function redisCheck(redis: Pick<Redis, 'status'>): DependencyCheck {
  return {
    name: 'redis',
    critical: false,
    check: async () =>
      redis.status === 'ready' ? { status: 'up' } : { status: 'down', detail: `connection ${redis.status}` },
  };
}
