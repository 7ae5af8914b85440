import {
  type Chain,
  createClient,
  createPublicClient,
  createTestClient,
  defineChain,
  type Hex,
  http,
  type PrivateKeyAccount,
  type PublicClient,
  type TestClient,
  type Transport,
  type WalletActions,
  type WalletClient,
  walletActions,
} from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { sendTransaction } from 'viem/actions';
import { foundry } from 'viem/chains';
import { MULTICALL3_ADDRESS } from '../../src/payments/chain/index.js';

export type LocalPublicClient = PublicClient<Transport, Chain>;
export type LocalTestClient = TestClient<'anvil', Transport, Chain>;
export type LocalWalletClient = WalletClient<Transport, Chain, PrivateKeyAccount>;
type SendTransaction = WalletActions<Chain, PrivateKeyAccount>['sendTransaction'];

// viem's `foundry` chain declares no block time, so receipts would be polled every 4 s; blocks come every
// 0.2 s here. cacheTime 0: a cached block number would make viem wait a polling round for nothing.
const pollingInterval = 50;
const cacheTime = 0;

/** Multicall3's canonical address (the same on Base); the chain kit installs it there. */
export const multicall3Address = MULTICALL3_ADDRESS;

/** The viem chain of a local anvil (id 31337) whose default RPC is `rpcUrl`. */
export function localViemChain(rpcUrl: string): Chain {
  return defineChain({
    ...foundry,
    rpcUrls: { default: { http: [rpcUrl] } },
    contracts: { multicall3: { address: multicall3Address } },
  });
}

export function createLocalPublicClient(chain: Chain): LocalPublicClient {
  return createPublicClient({ chain, transport: http(), pollingInterval, cacheTime });
}

export function createLocalTestClient(chain: Chain): LocalTestClient {
  return createTestClient({ mode: 'anvil', chain, transport: http(), pollingInterval, cacheTime });
}

/**
 * A wallet client for one key whose sends are serialized: each takes the pending nonce only after the previous
 * send reached the node, so concurrent writes neither collide nor leave gaps. (viem's nonce managers burn a
 * nonce when gas estimation reverts, and later sends then wait forever behind the gap; its shared
 * `nonceManager` also remembers nonces across chains that all have id 31337.)
 */
export function createLocalWalletClient(chain: Chain, privateKey: Hex): LocalWalletClient {
  const base = createClient({
    account: privateKeyToAccount(privateKey),
    chain,
    transport: http(),
    pollingInterval,
    cacheTime,
  });
  let previous: Promise<unknown> = Promise.resolve();
  const serializedSend = ((args: Parameters<SendTransaction>[0]) => {
    const sent = previous.then(() => sendTransaction(base, args));
    previous = sent.catch(() => undefined);
    return sent;
  }) as SendTransaction;
  // walletActions bind to the client they extend: writeContract/deployContract then find the serialized send
  // on it; the last extend replaces the plain sendTransaction that walletActions adds.
  return base
    .extend(() => ({ sendTransaction: serializedSend }))
    .extend(walletActions)
    .extend(() => ({ sendTransaction: serializedSend }));
}
