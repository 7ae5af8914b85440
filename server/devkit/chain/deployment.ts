import type { SmartAccountsEnvironment } from '@metamask/smart-accounts-kit';
import { deploySmartAccountsEnvironment } from '@metamask/smart-accounts-kit/utils';
import { x402UptoPermit2ProxyAddress } from '@x402/evm';
import { type Address, getAddress } from 'viem';
import { artifact as multicall3Artifact } from '../contracts/artifacts/Multicall3.js';
import { artifact as testUsdcArtifact } from '../contracts/artifacts/TestUSDC.js';
import { artifact as uptoProxyArtifact } from '../contracts/artifacts/X402UptoPermit2Proxy.js';
import { permit2Address, permit2RuntimeCode } from '../contracts/permit2.js';
import {
  type LocalPublicClient,
  type LocalTestClient,
  type LocalWalletClient,
  multicall3Address,
} from './clients.js';

/** Where the contracts of a local chain live; the same on every chain started from one snapshot. */
export interface LocalDeployment {
  usdc: Address;
  environment: SmartAccountsEnvironment;
}

/** Bump when what `deployLocalContracts` does changes, so cached snapshots are rebuilt. */
export const deploymentScriptVersion = 4;

/**
 * Deploys the test USDC (owned by the deployer) and the MetaMask Delegation Framework, in this order, from a
 * fresh deployer: the addresses depend only on the deployer's nonces, so they are deterministic. Multicall3,
 * Permit2 and x402's \`upto\` proxy go to their canonical addresses, as on Base.
 */
export async function deployLocalContracts(clients: {
  deployer: LocalWalletClient;
  publicClient: LocalPublicClient;
  testClient: LocalTestClient;
}): Promise<LocalDeployment> {
  const { deployer, publicClient, testClient } = clients;
  await testClient.setCode({ address: multicall3Address, bytecode: multicall3Artifact.deployedBytecode });
  await testClient.setCode({ address: permit2Address, bytecode: permit2RuntimeCode });
  await testClient.setCode({
    address: x402UptoPermit2ProxyAddress,
    bytecode: uptoProxyArtifact.deployedBytecode,
  });
  const usdcTx = await deployer.deployContract({
    abi: testUsdcArtifact.abi,
    bytecode: testUsdcArtifact.bytecode,
    args: [deployer.account.address],
  });
  const environment = await deploySmartAccountsEnvironment(deployer, publicClient, deployer.chain);
  const { contractAddress, status } = await publicClient.waitForTransactionReceipt({ hash: usdcTx });
  if (status !== 'success' || !contractAddress) throw new Error(`TestUSDC deployment failed (${usdcTx})`);
  return { usdc: getAddress(contractAddress), environment: checksummed(environment) };
}

// The kit reports lowercase addresses; everything else viem returns is checksummed.
function checksummed(environment: SmartAccountsEnvironment): SmartAccountsEnvironment {
  const each = (addresses: Record<string, Address>) =>
    Object.fromEntries(Object.entries(addresses).map(([name, address]) => [name, getAddress(address)]));
  return {
    DelegationManager: getAddress(environment.DelegationManager),
    EntryPoint: getAddress(environment.EntryPoint),
    SimpleFactory: getAddress(environment.SimpleFactory),
    implementations: each(environment.implementations),
    caveatEnforcers: each(environment.caveatEnforcers),
  };
}
