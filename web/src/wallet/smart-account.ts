import {
  Implementation,
  type MetaMaskSmartAccount,
  toMetaMaskSmartAccount,
} from '@metamask/smart-accounts-kit';
import { useQuery } from '@tanstack/react-query';
import { type Address, concat, erc20Abi, type Hex, type PublicClient } from 'viem';
import { useBytecode, useConnection, usePublicClient, useReadContract, useWalletClient } from 'wagmi';
import type { Terms } from '../gateway/terms';

/**
 * What pays the gateway: a HybridDeleGator the owner's wallet controls (a new address to fund), or the
 * owner's own address, upgraded with EIP-7702 to the framework's EIP7702StatelessDeleGator.
 */
export type AccountKind = 'hybrid' | 'eip7702';
export type SmartAccount = MetaMaskSmartAccount<Implementation.Hybrid | Implementation.Stateless7702>;

const REFRESH_MS = 3_000;

/**
 * The paying account, signing with the connected wallet: the owner's HybridDeleGator (salt 0), whose
 * counterfactual address is known before it is deployed, or the owner's own address as a 7702 account.
 */
export function useSmartAccount(terms: Terms, kind: AccountKind) {
  const { address: owner, chainId } = useConnection();
  const publicClient = usePublicClient({ chainId: terms.chainId });
  const { data: walletClient } = useWalletClient({ chainId: terms.chainId });
  return useQuery({
    queryKey: ['smart-account', kind, terms.chainId, owner, walletClient?.uid],
    enabled: Boolean(owner && publicClient && walletClient && chainId === terms.chainId),
    queryFn: (): Promise<SmartAccount> =>
      kind === 'eip7702'
        ? toMetaMaskSmartAccount({
            client: publicClient!,
            implementation: Implementation.Stateless7702,
            address: owner!,
            signer: { walletClient: walletClient! },
            environment: terms.environment,
          })
        : toMetaMaskSmartAccount({
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
  /** Its code: a 7702 account's is `0xef0100 || implementation`. */
  code: Hex | undefined;
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
    code: code.data ?? undefined,
    balance: balance.data,
    error: code.error ?? balance.error,
    refetch: () => Promise.all([code.refetch(), balance.refetch()]),
  };
}

/**
 * Whether an EOA's code delegates (EIP-7702) to the framework's stateless DeleGator; undefined until the
 * code is known. Its code is then `0xef0100 || implementation`.
 */
export function upgradedTo7702(terms: Terms, state: AccountState): boolean | undefined {
  if (state.deployed === undefined) return undefined;
  return delegatesToStatelessDeleGator(terms, state.code);
}

function delegatesToStatelessDeleGator(terms: Terms, code: Hex | undefined): boolean {
  const implementation = terms.environment.implementations.EIP7702StatelessDeleGatorImpl;
  return Boolean(
    implementation && code?.toLowerCase() === concat(['0xef0100', implementation]).toLowerCase(),
  );
}

const UPGRADE_WAIT_MS = 120_000;

/**
 * Resolves once `address` delegates to the stateless DeleGator: a wallet may send that upgrade as it grants
 * a permission, and the gateway refuses a delegator without code. Throws after two minutes without it.
 */
export async function untilUpgraded(client: PublicClient, terms: Terms, address: Address): Promise<void> {
  const deadline = Date.now() + UPGRADE_WAIT_MS;
  while (!delegatesToStatelessDeleGator(terms, await client.getCode({ address }))) {
    if (Date.now() > deadline)
      throw new Error(
        `${address} is still not a smart account (EIP-7702): confirm the upgrade in your wallet, then authorize again`,
      );
    await new Promise((resolve) => setTimeout(resolve, REFRESH_MS));
  }
}
