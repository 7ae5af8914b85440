import { createHash, randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';
import type { Hex } from 'viem';
import { artifact as multicall3Artifact } from '../contracts/artifacts/Multicall3.js';
import { artifact as testUsdcArtifact } from '../contracts/artifacts/TestUSDC.js';
import { artifact as uptoProxyArtifact } from '../contracts/artifacts/X402UptoPermit2Proxy.js';
import { permit2RuntimeCode } from '../contracts/permit2.js';
import { localChainAccounts } from './accounts.js';
import { anvilVersion, rpc, startAnvil } from './anvil.js';
import {
  createLocalPublicClient,
  createLocalTestClient,
  createLocalWalletClient,
  localViemChain,
} from './clients.js';
import { deployLocalContracts, deploymentScriptVersion, type LocalDeployment } from './deployment.js';

/** An anvil state with the local contracts deployed, and where they are. */
export interface ChainSnapshot {
  /** A file for `anvil --load-state`. */
  statePath: string;
  deployment: LocalDeployment;
  /** False when an earlier run had already cached it. */
  created: boolean;
}

const require = createRequire(import.meta.url);

/** `server/node_modules/.cache/paygate-chain` (disposable, never committed), or the OS temp dir without it. */
export function defaultSnapshotDir(): string {
  const nodeModules = fileURLToPath(new URL('../../node_modules', import.meta.url));
  return existsSync(nodeModules)
    ? join(nodeModules, '.cache', 'paygate-chain')
    : join(tmpdir(), 'paygate-chain');
}

/** Changes whenever anything that shapes the deployed state changes. */
export function snapshotKey(): string {
  const kit = require('@metamask/smart-accounts-kit/package.json') as { version: string };
  return createHash('sha256')
    .update(
      JSON.stringify([
        testUsdcArtifact.bytecode,
        multicall3Artifact.deployedBytecode,
        permit2RuntimeCode,
        uptoProxyArtifact.deployedBytecode,
        kit.version,
        anvilVersion(),
        deploymentScriptVersion,
      ]),
    )
    .digest('hex')
    .slice(0, 16);
}

/** The cached snapshot for the current key, built (in ~1 s) when missing. */
export async function loadOrCreateSnapshot(dir = defaultSnapshotDir()): Promise<ChainSnapshot> {
  const key = snapshotKey();
  const statePath = join(dir, `${key}.state.json`);
  const deploymentPath = join(dir, `${key}.deployment.json`);
  if (existsSync(statePath)) {
    try {
      const deployment = JSON.parse(await readFile(deploymentPath, 'utf8')) as LocalDeployment;
      return { statePath, deployment, created: false };
    } catch {
      // a half-written or foreign cache: rebuild it below
    }
  }
  await mkdir(dir, { recursive: true });
  const { state, deployment } = await deployOnFreshAnvil();
  // The deployment is renamed into place first: whoever sees the state file also finds the addresses.
  // Concurrent builders write identical addresses, so the last rename wins harmlessly.
  await writeAtomically(deploymentPath, JSON.stringify(deployment, null, 2));
  await writeAtomically(statePath, state);
  return { statePath, deployment, created: true };
}

/** Forgets a snapshot that turned out unusable, so the next call rebuilds it. */
export async function discardSnapshot(snapshot: ChainSnapshot): Promise<void> {
  await rm(snapshot.statePath, { force: true });
}

async function deployOnFreshAnvil(): Promise<{ state: Buffer; deployment: LocalDeployment }> {
  // Automine: the ~35 deployment transactions take ~0.5 s instead of ~8 s at 0.2 s per block. Chains loading
  // the state later run with their own block time.
  const anvil = await startAnvil({ blockTime: 0 });
  try {
    const chain = localViemChain(anvil.rpcUrl);
    const deployer = createLocalWalletClient(chain, localChainAccounts().deployer.privateKey);
    const deployment = await deployLocalContracts({
      deployer,
      publicClient: createLocalPublicClient(chain),
      testClient: createLocalTestClient(chain),
    });
    const dump = Buffer.from((await rpc<Hex>(anvil.rpcUrl, 'anvil_dumpState')).slice(2), 'hex');
    // anvil_dumpState gzips; --load-state only reads plain JSON.
    const state = dump[0] === 0x1f && dump[1] === 0x8b ? gunzipSync(dump) : dump;
    return { state, deployment };
  } finally {
    await anvil.stop();
  }
}

async function writeAtomically(path: string, contents: string | Buffer): Promise<void> {
  const temporary = `${path}.${process.pid}.${randomUUID()}.tmp`;
  await writeFile(temporary, contents);
  await rename(temporary, path);
}
