import { HybridDeleGator, MultiSigDeleGator, SimpleFactory } from '@metamask/delegation-abis';
import type { Delegation, SmartAccountsEnvironment } from '@metamask/smart-accounts-kit';
import {
  type Address,
  decodeAbiParameters,
  decodeFunctionData,
  type Hex,
  isAddressEqual,
  isErc6492Signature,
  type PublicClient,
  parseErc6492Signature,
} from 'viem';
import { SIGNABLE_DELEGATION_TYPED_DATA, toDelegationStruct } from './delegation-framework.js';

/** A smart account not deployed yet, and how to deploy it (from its ERC-6492 signature). */
export interface PendingDeployment {
  factory: Address;
  factoryData: Hex;
}

/** The signature the DelegationManager accepts, and the deployment that must come first, if any. */
export interface RedeemableSignature {
  signature: Hex;
  deployment?: PendingDeployment;
}

/** The EIP-712 domain a delegation is signed in: the DelegationManager's. */
export function delegationDomain(chainId: number, delegationManager: Address) {
  return { name: 'DelegationManager', version: '1', chainId, verifyingContract: delegationManager } as const;
}

/**
 * Whether `signature` is the delegator's signature of the delegation: ERC-1271 for a deployed
 * smart account, ERC-6492 for one not deployed yet (viem's universal validator, one eth_call).
 * A signature the account rejects (or reverts on) is invalid; a failing RPC throws.
 */
export async function verifyDelegationSignature(
  client: PublicClient,
  domain: ReturnType<typeof delegationDomain>,
  delegation: Omit<Delegation, 'signature'>,
  signature: Hex,
): Promise<boolean> {
  return client.verifyTypedData({
    address: delegation.delegator,
    domain,
    types: SIGNABLE_DELEGATION_TYPED_DATA,
    primaryType: 'Delegation',
    message: toDelegationStruct({ ...delegation, signature: '0x' }),
    signature,
  });
}

/**
 * The DelegationManager checks signatures with ERC-1271 on the deployed account only, so an
 * ERC-6492 signature is split into the raw signature and the factory call that deploys the account.
 */
export function redeemableSignature(signature: Hex): RedeemableSignature {
  if (!isErc6492Signature(signature)) return { signature };
  const parsed = parseErc6492Signature(signature);
  if (!parsed.address || !parsed.data) return { signature: parsed.signature };
  return { signature: parsed.signature, deployment: { factory: parsed.address, factoryData: parsed.data } };
}

/**
 * Only the deployment of a MetaMask smart account is sent with the gateway's key: the framework's
 * SimpleFactory deploying its ERC-1967 proxy over one of its DeleGator implementations, initialized
 * by that implementation's `initialize`. Any other call would have the gateway pay the gas of
 * deploying whatever contract a payer chose (one that answers the signature check and pays nothing).
 */
export async function deploysDeleGator(
  deployment: PendingDeployment,
  environment: Pick<SmartAccountsEnvironment, 'SimpleFactory' | 'implementations'>,
): Promise<boolean> {
  if (!isAddressEqual(deployment.factory, environment.SimpleFactory)) return false;
  // Loaded when first needed: the module holds every framework contract's bytecode (a few MB).
  const { ERC1967Proxy: ERC1967ProxyBytecode } = await import('@metamask/delegation-abis/bytecode');
  try {
    const deploy = decodeFunctionData({ abi: SimpleFactory, data: deployment.factoryData });
    if (deploy.functionName !== 'deploy') return false;
    const [creationCode] = deploy.args;
    if (!creationCode.toLowerCase().startsWith(ERC1967ProxyBytecode.toLowerCase())) return false;
    const [implementation, initialization] = decodeAbiParameters(
      [{ type: 'address' }, { type: 'bytes' }],
      `0x${creationCode.slice(ERC1967ProxyBytecode.length)}`,
    );
    const { HybridDeleGatorImpl, MultiSigDeleGatorImpl } = environment.implementations;
    const abi =
      HybridDeleGatorImpl && isAddressEqual(implementation, HybridDeleGatorImpl)
        ? HybridDeleGator
        : MultiSigDeleGatorImpl && isAddressEqual(implementation, MultiSigDeleGatorImpl)
          ? MultiSigDeleGator
          : undefined;
    return (
      abi !== undefined && decodeFunctionData({ abi, data: initialization }).functionName === 'initialize'
    );
  } catch {
    // Calldata that does not decode as such a deployment.
    return false;
  }
}
