import { type Address, encodeFunctionData, type Hash } from 'viem';
import { usdcBalanceOf } from '../../src/payments/chain/index.js';
import { artifact } from '../contracts/artifacts/TestUSDC.js';
import type { LocalChain } from './local-chain.js';

export const testUsdcAbi = artifact.abi;

/** The token's EIP-712 name and version, as USDC on Base: x402's `extra: { name, version }`. */
export const testUsdcEip712 = { name: 'USD Coin', version: '2' } as const;

/** USDC atomic units (1e-6) held by `address`: the gateway's own read. */
export function usdcBalance(
  chain: Pick<LocalChain, 'publicClient' | 'usdc'>,
  address: Address,
): Promise<bigint> {
  return usdcBalanceOf(chain, address);
}

/** Mints `amount` atomic units to `to` and resolves with the hash once the transaction is mined. */
export async function mintUsdc(
  chain: Pick<LocalChain, 'publicClient' | 'deployer' | 'usdc'>,
  to: Address,
  amount: bigint,
): Promise<Hash> {
  const hash = await chain.deployer.writeContract({
    address: chain.usdc,
    abi: testUsdcAbi,
    functionName: 'mint',
    args: [to, amount],
  });
  await confirm(chain, hash, 'mint');
  return hash;
}

/** Waits for the receipt and turns a reverted transaction into an error. */
export async function confirm(
  chain: Pick<LocalChain, 'publicClient'>,
  hash: Hash,
  what: string,
): Promise<void> {
  const receipt = await chain.publicClient.waitForTransactionReceipt({ hash });
  if (receipt.status !== 'success') throw new Error(`${what} reverted (${hash})`);
}

/**
 * `holder` moves all its USDC to the deployer (anvil impersonates it, and gives it the gas), as a
 * payer emptying its account after a request was admitted.
 */
export async function emptyUsdc(
  chain: Pick<LocalChain, 'publicClient' | 'testClient' | 'deployer' | 'usdc'>,
  holder: Address,
): Promise<void> {
  const amount = await usdcBalance(chain, holder);
  await chain.testClient.impersonateAccount({ address: holder });
  await chain.testClient.setBalance({ address: holder, value: 10n ** 18n });
  const hash = await chain.testClient.sendUnsignedTransaction({
    from: holder,
    to: chain.usdc,
    data: encodeFunctionData({
      abi: testUsdcAbi,
      functionName: 'transfer',
      args: [chain.deployer.account.address, amount],
    }),
  });
  await chain.testClient.stopImpersonatingAccount({ address: holder });
  await confirm(chain, hash, 'emptying the account');
}
