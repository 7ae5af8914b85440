import type { Redis } from 'ioredis';
import {
  createPublicClient,
  formatEther,
  formatGwei,
  http,
  type PublicClient,
  TimeoutError,
  webSocket,
} from 'viem';
import {
  DEFAULT_ANTHROPIC_BASE_URL,
  DEFAULT_GEMINI_BASE_URL,
  DEFAULT_RELAYER_MIN_SETTLEMENTS_LEFT,
  type GatewayConfig,
  type UpstreamConfig,
} from '../config.js';
import type { DependencyCheck, DependencyState } from '../health.js';
import type { RelayerFunds, RelayerRunway } from '../observability/index.js';
import { chainErrorReason } from '../payments/chain/index.js';

/** The probes of the core: the chain RPC, each built-in provider, the relayer's ETH, and Redis when it is used. */
export function coreHealthChecks(
  config: GatewayConfig,
  { redis, relayer }: { redis?: Redis; relayer?: RelayerFunds } = {},
): DependencyCheck[] {
  const minSettlementsLeft = config.limits.relayerMinSettlementsLeft ?? DEFAULT_RELAYER_MIN_SETTLEMENTS_LEFT;
  return [
    chainRpcCheck(probeClient(config.chain.rpcUrl), config.chain.chainId),
    ...(relayer ? [relayerRunwayCheck(relayer, minSettlementsLeft)] : []),
    providerCheck('anthropic', config.providers.anthropic, DEFAULT_ANTHROPIC_BASE_URL, 'ANTHROPIC_API_KEY'),
    providerCheck('google', config.providers.google, DEFAULT_GEMINI_BASE_URL, 'GEMINI_API_KEY'),
    ...(redis ? [redisCheck(redis)] : []),
  ];
}

/** What the chain probes read: the head, which chain the node is on, and the relayer's funds. */
export type ChainProbe = Pick<PublicClient, 'getBlockNumber' | 'getChainId' | 'getBalance' | 'getGasPrice'>;

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
    getBalance: (args) => answeredWithin(timeoutMs, client.getBalance(args)),
    getGasPrice: () => answeredWithin(timeoutMs, client.getGasPrice()),
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
  client: Pick<ChainProbe, 'getBlockNumber' | 'getChainId'>,
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

/**
 * Not critical: settlements go on while the relayer's ETH lasts. A warning once its runway (what its
 * balance pays of settlements at the current gas price) is below `minSettlementsLeft`
 * (RELAYER_MIN_SETTLEMENTS_LEFT); down when the chain cannot say.
 */
export function relayerRunwayCheck(funds: RelayerFunds, minSettlementsLeft: number): DependencyCheck {
  return {
    name: 'relayer',
    critical: false,
    async check() {
      let runway: RelayerRunway;
      try {
        runway = await funds.runway();
      } catch (error) {
        return { status: 'down', detail: chainErrorReason(error) };
      }
      const { balanceWei, gasPriceWei, settlementGas, settlementsLeft } = runway;
      const state = {
        address: funds.address,
        balanceWei: balanceWei.toString(),
        gasPriceWei: gasPriceWei.toString(),
        settlementGas: settlementGas.toString(),
        settlementsLeft: Number.isFinite(settlementsLeft) ? settlementsLeft : null,
        minSettlementsLeft,
      };
      const detail = `${formatEther(balanceWei)} ETH: about ${settlementsLeft} settlements of ${settlementGas} gas at ${formatGwei(gasPriceWei)} gwei`;
      if (settlementsLeft >= minSettlementsLeft) return { status: 'up', detail, state };
      return {
        status: 'warning',
        detail: `${detail}, fewer than RELAYER_MIN_SETTLEMENTS_LEFT (${minSettlementsLeft}): send ETH to ${funds.address}`,
        state,
      };
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
