import { type Chain, defineChain } from 'viem';
import { base, baseSepolia } from 'viem/chains';
import { type Config, createConfig, http, injected, mock } from 'wagmi';
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

/** The chain the gateway settles on, first: wagmi starts there and the test account lives there. */
export function gatewayChains(terms: Terms): [Chain, ...Chain[]] {
  const rpcUrl = terms.rpcUrl ?? import.meta.env.VITE_LOCAL_RPC_URL ?? DEFAULT_LOCAL_RPC;
  const known = [base, baseSepolia, localChain(rpcUrl)];
  const own = known.find((chain) => chain.id === terms.chainId);
  if (!own)
    throw new Error(`the gateway settles on chain ${terms.chainId}, which this dashboard does not know`);
  return [own, ...known.filter((chain) => chain !== own)];
}

/** Browser wallets (EIP-1193) everywhere; on the local chain also anvil's test account. */
export function createWalletConfig(terms: Terms): Config {
  const chains = gatewayChains(terms);
  const local = terms.chainId === LOCAL_CHAIN_ID;
  return createConfig({
    chains,
    connectors: [
      injected(),
      ...(local ? [mock({ accounts: [LOCAL_TEST_ACCOUNT], features: { reconnect: true } })] : []),
    ],
    transports: Object.fromEntries(
      chains.map((chain) => [chain.id, http(chain.rpcUrls.default.http[0], { batch: false })]),
    ),
    pollingInterval: local ? 500 : 4_000,
  });
}
