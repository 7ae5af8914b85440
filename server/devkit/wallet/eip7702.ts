import type { Address, Hash, PrivateKeyAccount, PublicClient, WalletClient } from 'viem';
import { concat } from 'viem';

/** The code of an EOA delegating (EIP-7702) to `contract`: the designator `0xef0100 || contract`. */
export const delegationDesignator = (contract: Address) => concat(['0xef0100', contract]).toLowerCase();

/**
 * Upgrades `owner`'s EOA to `implementation` (the framework's EIP7702StatelessDeleGator) with a type-4
 * transaction: the owner signs the authorization, `sponsor` sends it and pays the gas, as a wallet's
 * relayer would. No-op when the EOA already delegates there.
 */
export async function upgradeEoa(options: {
  owner: PrivateKeyAccount;
  implementation: Address;
  sponsor: WalletClient;
  client: PublicClient;
}): Promise<Hash | undefined> {
  const { owner, implementation, sponsor, client } = options;
  const code = await client.getCode({ address: owner.address });
  if (code?.toLowerCase() === delegationDesignator(implementation)) return undefined;
  const authorization = await owner.signAuthorization({
    contractAddress: implementation,
    chainId: await client.getChainId(),
    nonce: await client.getTransactionCount({ address: owner.address }),
  });
  if (!sponsor.account) throw new Error('the sponsor wallet client has no account');
  const hash = await sponsor.sendTransaction({
    account: sponsor.account,
    chain: sponsor.chain,
    to: owner.address,
    authorizationList: [authorization],
  });
  const receipt = await client.waitForTransactionReceipt({ hash });
  if (receipt.status !== 'success')
    throw new Error(`the EIP-7702 upgrade of ${owner.address} reverted (${hash})`);
  return hash;
}
