import { type Chain, defineChain } from 'viem';
import { base, baseSepolia } from 'viem/chains';
import { type Config, createConfig, http, injected, mock, type Transport, unstable_connector } from 'wagmi';
import { LOCAL_CHAIN_ID, type Terms } from '../gateway/terms';

/**
 * anvil's dev account #3 (mnemonic "test test ... junk"): publicly known, unlocked on every local chain,
 * so anvil itself signs for it (eth_signTypedData_v4, eth_sendTransaction). Accounts #0-#2 are the local
 * stack's deployer, gateway and treasury.
 */
export const LOCAL_TEST_ACCOUNT = '0x90F79bf6EB2c4f870365E785982E1f101E93b906';

/** The connector id of the local test account. */
export const TEST_ACCOUNT_CONNECTOR = 'mock';

const DEFAULT_LOCAL_RPC = 'http://127.0.0.1:8545';

export function localChain(rpcUrl: string): Chain {
  return defineChain({
    id: LOCAL_CHAIN_ID,
    name: 'Local chain (anvil)',
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
    testnet: true,
  });
}

/**
 * A chain this dashboard has no definition of, from what the gateway says of it: its id, its CAIP-2 name,
 * and its JSON-RPC endpoint when the gateway publishes one (a local stack does). Without one, the
 * connected wallet is the chain's only RPC (see `rpcFromWallet`).
 */
export function chainFromTerms(terms: Terms): Chain {
  return defineChain({
    id: terms.chainId,
    name: `eip155:${terms.chainId}`,
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: terms.rpcUrl ? [terms.rpcUrl] : [] } },
  });
}

/** Whether the dashboard reaches the chain only through the connected browser wallet: it knows no RPC URL. */
export function rpcFromWallet(chain: Chain): boolean {
  return chain.rpcUrls.default.http.length === 0;
}

/**
 * The chain the gateway settles on, first (wagmi starts there and the test account lives there), then
 * the others this dashboard knows, to name the network a wallet is on. Any chain id works: one the
 * dashboard does not know is defined from the gateway's terms.
 */
export function gatewayChains(terms: Terms): [Chain, ...Chain[]] {
  const localRpc = import.meta.env.VITE_LOCAL_RPC_URL ?? DEFAULT_LOCAL_RPC;
  const known = [base, baseSepolia, localChain(localRpc)];
  const own =
    terms.chainId === LOCAL_CHAIN_ID
      ? localChain(terms.rpcUrl ?? localRpc)
      : (known.find((chain) => chain.id === terms.chainId) ?? chainFromTerms(terms));
  return [own, ...known.filter((chain) => chain.id !== own.id)];
}

/** Browser wallets (EIP-1193) everywhere; on the local chain also anvil's test account. */
export function createWalletConfig(terms: Terms): Config {
  const chains = gatewayChains(terms);
  const local = terms.chainId === LOCAL_CHAIN_ID;
  const transport = (chain: Chain): Transport =>
    rpcFromWallet(chain)
      ? // reads go through the browser wallet, on the gateway's chain (it refuses them on another)
        unstable_connector(injected)
      : http(chain.rpcUrls.default.http[0], { batch: false });
  return createConfig({
    chains,
    connectors: [
      injected(),
      ...(local ? [mock({ accounts: [LOCAL_TEST_ACCOUNT], features: { reconnect: true } })] : []),
    ],
    transports: Object.fromEntries(chains.map((chain) => [chain.id, transport(chain)])),
    pollingInterval: local ? 500 : 4_000,
  });
}
