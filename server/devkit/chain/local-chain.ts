import type { SmartAccountsEnvironment } from '@metamask/smart-accounts-kit';
import type { Address, Chain } from 'viem';
import { type LocalChainAccounts, localChainAccounts } from './accounts.js';
import { startAnvil } from './anvil.js';
import {
  createLocalPublicClient,
  createLocalTestClient,
  createLocalWalletClient,
  type LocalPublicClient,
  type LocalTestClient,
  type LocalWalletClient,
  localViemChain,
} from './clients.js';
import { type ChainSnapshot, defaultSnapshotDir, discardSnapshot, loadOrCreateSnapshot } from './snapshot.js';

export interface LocalChainOptions {
  /** Seconds between blocks; 0 mines one block per transaction. Default 0.2 (Base-like). */
  blockTime?: number;
  /** Default: a free port. */
  port?: number;
  /** Where the deployed-state snapshot is cached. Default `server/node_modules/.cache/paygate-chain`. */
  snapshotDir?: string;
}

/** A running anvil with the test USDC and the Delegation Framework deployed, and clients for it. */
export interface LocalChain {
  rpcUrl: string;
  chainId: number;
  chain: Chain;
  /** Polls every 50 ms, caches nothing. */
  publicClient: LocalPublicClient;
  /** anvil cheat codes: setBalance, increaseTime, mine, ... */
  testClient: LocalTestClient;
  /** The deployer's wallet: owner of the USDC (mints), gas payer of account deployments. Sends are serialized. */
  deployer: LocalWalletClient;
  /** The test USDC ("USD Coin", 6 decimals, EIP-712 version "2"). */
  usdc: Address;
  /** The Delegation Framework: DelegationManager, EntryPoint, SimpleFactory, implementations, enforcers. */
  environment: SmartAccountsEnvironment;
  accounts: LocalChainAccounts;
  /** The anvil process. */
  pid: number;
  /** Kills anvil; resolves once it is gone. */
  stop(): Promise<void>;
}

/**
 * Starts a local chain with everything deployed. The first call on a machine deploys (~1 s) and caches
 * anvil's state; later calls load it (well under 1 s). Every chain is independent: state never leaks
 * between them. Call `stop()` when done (if forgotten, anvil still dies with this process).
 */
export async function createLocalChain(options: LocalChainOptions = {}): Promise<LocalChain> {
  const snapshotDir = options.snapshotDir ?? defaultSnapshotDir();
  const snapshot = await loadOrCreateSnapshot(snapshotDir);
  try {
    return await startFromSnapshot(snapshot, options);
  } catch (err) {
    if (snapshot.created) throw err;
    // A cached snapshot from an interrupted or foreign run: rebuild it once.
    await discardSnapshot(snapshot);
    return startFromSnapshot(await loadOrCreateSnapshot(snapshotDir), options);
  }
}

async function startFromSnapshot(snapshot: ChainSnapshot, options: LocalChainOptions): Promise<LocalChain> {
  const anvil = await startAnvil({
    blockTime: options.blockTime ?? 0.2,
    port: options.port,
    loadState: snapshot.statePath,
  });
  const { usdc, environment } = snapshot.deployment;
  const chain = localViemChain(anvil.rpcUrl);
  const publicClient = createLocalPublicClient(chain);
  const accounts = localChainAccounts();
  const [usdcCode, managerCode] = await Promise.all([
    publicClient.getCode({ address: usdc }),
    publicClient.getCode({ address: environment.DelegationManager }),
  ]);
  if (!usdcCode || !managerCode) {
    await anvil.stop();
    throw new Error(`the chain snapshot ${snapshot.statePath} lacks the deployed contracts`);
  }
  return {
    rpcUrl: anvil.rpcUrl,
    chainId: chain.id,
    chain,
    publicClient,
    testClient: createLocalTestClient(chain),
    deployer: createLocalWalletClient(chain, accounts.deployer.privateKey),
    usdc,
    environment,
    accounts,
    pid: anvil.pid,
    stop: anvil.stop,
  };
}
