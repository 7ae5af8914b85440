import type { SmartAccountsEnvironment } from '@metamask/smart-accounts-kit';
import {
  type Address,
  BaseError,
  type Chain,
  createPublicClient,
  defineChain,
  ExecutionRevertedError,
  erc20Abi,
  getAddress,
  HttpRequestError,
  http,
  type PublicClient,
  parseAbi,
  RpcRequestError,
  SocketClosedError,
  TimeoutError,
  type Transport,
  WebSocketRequestError,
  webSocket,
} from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { type ChainConfig, ConfigError } from '../../config.js';
import { deployedEnvironment } from './delegation-framework.js';
import type { OnceSends } from './once-sends.js';
import { createRelayer, type Relayer, type SendLock } from './relayer.js';

/** The token's identity as EIP-712 signers (x402, permits) and wallets need it. */
export interface TokenMetadata {
  address: Address;
  name: string;
  version: string;
  decimals: number;
}

/** Everything the payment rails need from the chain: a reader, the relayer, and the contracts. */
export interface ChainClient {
  chainId: number;
  /** CAIP-2, e.g. `eip155:8453`. */
  network: `eip155:${number}`;
  publicClient: PublicClient<Transport, Chain>;
  /** The session key: delegate of session delegations and sender of settlements. */
  relayer: Relayer;
  usdc: Address;
  treasury: Address;
  /** The Delegation Framework: DelegationManager and caveat enforcers. */
  environment: SmartAccountsEnvironment;
  /** Read from the token once, then remembered (a failed read is retried next time). */
  token(): Promise<TokenMetadata>;
}

export interface ChainClientOptions {
  /** Serializes the relayer's sends; in this process when absent (one gateway sends from the key). */
  sendLock?: SendLock;
  /** Where the relayer remembers the transactions no settlement records; in this process when absent. */
  onceSends?: OnceSends;
}

export function createChainClient(chain: ChainConfig, options: ChainClientOptions = {}): ChainClient {
  const viemChain = defineChain({
    id: chain.chainId,
    name: `eip155:${chain.chainId}`,
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [chain.rpcUrl] } },
  });
  const transport = /^wss?:/.test(chain.rpcUrl) ? webSocket(chain.rpcUrl) : http(chain.rpcUrl);
  const publicClient = createPublicClient({
    chain: viemChain,
    transport,
    // viem's default (4 s without a block time) would add seconds to every settlement.
    pollingInterval: chain.pollIntervalMs,
    cacheTime: 0,
  });
  const usdc = getAddress(chain.usdcAddress);
  let tokenRead: Promise<TokenMetadata> | undefined;
  return {
    chainId: chain.chainId,
    network: `eip155:${chain.chainId}`,
    publicClient,
    relayer: createRelayer(publicClient, privateKeyToAccount(chain.sessionKeyPrivateKey), chain.chainId, {
      lock: options.sendLock,
      maxFeePerGas: chain.maxFeePerGasWei,
      sends: options.onceSends,
    }),
    usdc,
    treasury: getAddress(chain.treasuryAddress),
    environment: delegationEnvironment(chain),
    token() {
      tokenRead ??= readToken(publicClient, usdc).catch((error) => {
        tokenRead = undefined;
        throw error;
      });
      return tokenRead;
    },
  };
}

/**
 * The Delegation Framework of the configured chain: CHAIN_ENVIRONMENT_FILE when given (a local
 * chain), else the kit's deployment for the chain id; DELEGATION_MANAGER_ADDRESS overrides its manager.
 */
export function delegationEnvironment(chain: ChainConfig): SmartAccountsEnvironment {
  let environment = chain.delegationEnvironment;
  if (!environment) {
    try {
      environment = deployedEnvironment(chain.chainId);
    } catch {
      throw new ConfigError(
        'CHAIN_ENVIRONMENT_FILE',
        `is required on chain ${chain.chainId}: the Delegation Framework has no known deployment there`,
      );
    }
  }
  const enforcers = Object.fromEntries(
    Object.entries(environment.caveatEnforcers).map(([name, address]) => [name, getAddress(address)]),
  );
  return {
    ...environment,
    DelegationManager: getAddress(chain.delegationManagerAddress ?? environment.DelegationManager),
    caveatEnforcers: enforcers,
  };
}

/** What went wrong on the chain, without the RPC URL (it may carry an API key). */
export function chainErrorReason(error: unknown): string {
  return error instanceof BaseError ? error.shortMessage : 'the RPC call failed';
}

const TRANSPORT_ERRORS = [
  HttpRequestError,
  RpcRequestError,
  SocketClosedError,
  TimeoutError,
  WebSocketRequestError,
];

/**
 * The node could not be reached, did not answer in time, or failed the call itself: retry later.
 * Anything else viem throws is about the input (a signature or proof it cannot decode), and so is
 * a call the node answered by reverting.
 */
export function isTransportFailure(error: unknown): boolean {
  return (
    error instanceof BaseError &&
    !isExecutionRevert(error) &&
    error.walk((cause) => TRANSPORT_ERRORS.some((type) => cause instanceof type)) !== null
  );
}

/**
 * viem keeps the node's JSON-RPC answer beneath a revert: an RpcRequestError of code 3 (alone
 * from a bare request; under an ExecutionRevertedError from an action), which is not a failed call.
 */
function isExecutionRevert(error: BaseError): boolean {
  return (
    error.walk(
      (cause) =>
        cause instanceof ExecutionRevertedError ||
        (cause instanceof RpcRequestError && cause.code === ExecutionRevertedError.code),
    ) !== null
  );
}

/** An error's message as fit to store or show (/health): a node call's without the RPC URL. */
export function shownReason(error: unknown): string {
  if (error instanceof BaseError) return chainErrorReason(error);
  return error instanceof Error ? error.message : String(error);
}

const versionAbi = parseAbi(['function version() view returns (string)']);

async function readToken(client: PublicClient, address: Address): Promise<TokenMetadata> {
  const [name, version, decimals] = await Promise.all([
    client.readContract({ address, abi: erc20Abi, functionName: 'name' }),
    client.readContract({ address, abi: versionAbi, functionName: 'version' }),
    client.readContract({ address, abi: erc20Abi, functionName: 'decimals' }),
  ]);
  return { address, name, version, decimals };
}
