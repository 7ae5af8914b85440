import { randomUUID } from 'node:crypto';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { SmartAccountsEnvironment } from '@metamask/smart-accounts-kit';
import type { Address } from 'viem';
import type { TestOwner } from './test-owners.js';

export interface ProviderTarget {
  baseUrl: string;
  simulated: boolean;
}

/** What scripts and tools need to drive a running local stack; written to `data/local-stack.json`. */
export interface LocalStackFacts {
  gatewayUrl: string;
  /** The dashboard served by the gateway; null when web/dist is not built. */
  dashboardUrl: string | null;
  graphqlUrl: string;
  rpcUrl: string;
  chainId: number;
  /** The test USDC (6 decimals, EIP-712 name "USD Coin", version "2"). */
  usdc: Address;
  delegationManager: Address;
  /** Every Delegation Framework contract of the chain (factory, implementations, caveat enforcers). */
  environment: SmartAccountsEnvironment;
  treasury: Address;
  /** The gateway's session key: the delegate of payers' delegations. */
  sessionKeyAddress: Address;
  faucetUrl: string;
  /** Base URLs of the stack's provider simulators. */
  simulators: { anthropic: string; gemini: string; openai: string };
  /** Where the gateway sends each family: its simulator, or (its key or base URL set) the provider. */
  providers: { anthropic: ProviderTarget; gemini: ProviderTarget };
  testOwners: TestOwner[];
  /** The process serving the gateway, the faucet and the simulators. */
  pid: number;
  anvilPid: number;
  databaseUrl: string;
  startedAt: string;
}

/** Written whole or not at all: a reader never sees half a file. */
export async function writeStackFacts(path: string, facts: LocalStackFacts): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const temporary = `${path}.${process.pid}.${randomUUID()}.tmp`;
  await writeFile(temporary, `${JSON.stringify(facts, null, 2)}\n`);
  await rename(temporary, path);
}

/** Removes the file if it still describes this stack (another stack may have taken the data directory since). */
export async function removeStackFacts(path: string, facts: LocalStackFacts): Promise<void> {
  const current = await readFile(path, 'utf8').then(
    (text) => JSON.parse(text) as Partial<LocalStackFacts>,
    () => undefined,
  );
  if (current?.pid === facts.pid && current.gatewayUrl === facts.gatewayUrl) await rm(path, { force: true });
}
