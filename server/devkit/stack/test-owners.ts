import type { Address, Hex } from 'viem';
import { createPayerAccount, type LocalChain, mintUsdc } from '../chain/index.js';

/** A funded owner key of the local chain and its (deployed) HybridDeleGator smart account. */
export interface TestOwner {
  privateKey: Hex;
  /** The owner's EOA: signs delegations for its smart account, or pays itself on the x402 rail. */
  address: Address;
  /** The payer on the session-key rail: the owner's smart account with deploy salt 0x. */
  smartAccount: Address;
}

/**
 * Gives the first `count` payer keys of the chain a deployed smart account, and mints `usdcEach` (atomic units)
 * both to that account (session-key rail) and to the owner itself (x402 rail). The owners already hold anvil's ETH.
 */
export async function fundTestOwners(
  chain: LocalChain,
  count: number,
  usdcEach: bigint,
): Promise<TestOwner[]> {
  const keys = chain.accounts.payers.slice(0, count);
  if (keys.length < count)
    throw new Error(`the local chain has ${chain.accounts.payers.length} payer keys, ${count} asked`);
  return Promise.all(
    keys.map(async (key) => {
      const [payer] = await Promise.all([
        createPayerAccount(chain, key.privateKey, { fundUsdc: usdcEach }),
        mintUsdc(chain, key.address, usdcEach),
      ]);
      return { privateKey: key.privateKey, address: key.address, smartAccount: payer.address };
    }),
  );
}
