import type { SmartAccountsEnvironment } from '@metamask/smart-accounts-kit';
import { type Address, type Hex, isAddressEqual, keccak256, type PublicClient, size, sliceHex } from 'viem';

/** ERC-1967's implementation slot: keccak256("eip1967.proxy.implementation") - 1. */
const IMPLEMENTATION_SLOT = '0x360894a13ba1a3210667c828492db98dca3e2076cc3735a920a3ca505d382bbc';

/**
 * The hash of the code the framework's SimpleFactory leaves at a MetaMask smart account's address:
 * its ERC-1967 proxy, deployed (a test derives it from the kit's bytecode).
 */
export const DELEGATOR_PROXY_CODE_HASH = '0x8678a7d794f76a790255c0db52d6276dc7259cc7a211426bca106e5ebb4b1ddf';

/** EIP-7702: the code of an EOA that delegates to a contract is this prefix and the contract's address. */
const DELEGATION_DESIGNATOR = '0xef0100';

/** No code at all; a MetaMask smart account of the framework; any other code. */
export type DelegatorCode = 'none' | 'delegator' | 'other';

/**
 * What is deployed at `account`: a MetaMask smart account of the framework is its ERC-1967 proxy
 * over the Hybrid or MultiSig DeleGator, or an EOA delegating (EIP-7702) to its stateless DeleGator.
 * Only such an account's redemption pays as its simulation showed: any other contract can answer
 * the signature check and then pay nothing, or revert once sent, at the gateway's gas each time.
 */
export async function delegatorCode(
  client: Pick<PublicClient, 'getCode' | 'getStorageAt'>,
  account: Address,
  environment: Pick<SmartAccountsEnvironment, 'implementations'>,
): Promise<DelegatorCode> {
  const { HybridDeleGatorImpl, MultiSigDeleGatorImpl, EIP7702StatelessDeleGatorImpl } =
    environment.implementations;
  const [code, slot] = await Promise.all([
    client.getCode({ address: account }),
    client.getStorageAt({ address: account, slot: IMPLEMENTATION_SLOT }),
  ]);
  if (!code) return 'none';
  if (size(code) === 23 && code.toLowerCase().startsWith(DELEGATION_DESIGNATOR))
    return isOneOf(sliceHex(code, 3), [EIP7702StatelessDeleGatorImpl]) ? 'delegator' : 'other';
  if (keccak256(code) !== DELEGATOR_PROXY_CODE_HASH || !slot || size(slot) !== 32) return 'other';
  return isOneOf(sliceHex(slot, 12), [HybridDeleGatorImpl, MultiSigDeleGatorImpl]) ? 'delegator' : 'other';
}

function isOneOf(address: Hex, known: Array<Address | undefined>): boolean {
  return known.some((candidate) => candidate !== undefined && isAddressEqual(address, candidate));
}
