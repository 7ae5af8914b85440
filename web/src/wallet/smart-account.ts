import {
  Implementation,
  type MetaMaskSmartAccount,
  toMetaMaskSmartAccount,
} from '@metamask/smart-accounts-kit';
import { useQuery } from '@tanstack/react-query';
import { type Address, erc20Abi } from 'viem';
import { useBytecode, useConnection, usePublicClient, useReadContract, useWalletClient } from 'wagmi';
import type { Terms } from '../gateway/terms';

export type SmartAccount = MetaMaskSmartAccount<Implementation.Hybrid>;

const REFRESH_MS = 3_000;

/**
 * The owner's HybridDeleGator smart account (salt 0): its counterfactual address is known before it is
 * deployed, and it signs with the connected wallet.
 */
export function useSmartAccount(terms: Terms) {
  const { address: owner, chainId } = useConnection();
  const publicClient = usePublicClient({ chainId: terms.chainId });
  const { data: walletClient } = useWalletClient({ chainId: terms.chainId });
  return useQuery({
    queryKey: ['smart-account', terms.chainId, owner, walletClient?.uid],
    enabled: Boolean(owner && publicClient && walletClient && chainId === terms.chainId),
    queryFn: (): Promise<SmartAccount> =>
      toMetaMaskSmartAccount({
        client: publicClient!,
        implementation: Implementation.Hybrid,
        deployParams: [owner!, [], [], []],
        deploySalt: '0x',
        signer: { walletClient: walletClient! },
        environment: terms.environment,
      }),
    staleTime: Number.POSITIVE_INFINITY,
  });
}

export interface AccountState {
  /** Whether the account has code yet; undefined until known. */
  deployed: boolean | undefined;
  /** USDC held, atomic units. */
  balance: bigint | undefined;
  error: Error | null;
  refetch: () => Promise<unknown>;
}

/** The account's deployment and USDC balance, refreshed while shown. */
export function useAccountState(terms: Terms, address: Address | undefined): AccountState {
  const code = useBytecode({
    address,
    chainId: terms.chainId,
    query: { enabled: Boolean(address), refetchInterval: REFRESH_MS },
  });
  const balance = useReadContract({
    address: terms.usdc.address,
    abi: erc20Abi,
    functionName: 'balanceOf',
    args: address ? [address] : undefined,
    chainId: terms.chainId,
    query: { enabled: Boolean(address), refetchInterval: REFRESH_MS },
  });
  return {
    deployed: code.isSuccess ? Boolean(code.data) : undefined,
    balance: balance.data,
    error: code.error ?? balance.error,
    refetch: () => Promise.all([code.refetch(), balance.refetch()]),
  };
}
