import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Abi, Hex } from 'viem';

/** What `npm run contracts:build` writes to `artifacts/` and what the chain kit deploys. */
export interface ContractArtifact {
  contractName: string;
  compiler: string;
  abi: Abi;
  bytecode: Hex;
  deployedBytecode: Hex;
}

interface Solc {
  version(): string;
  compile(
    input: string,
    callbacks: { import(path: string): { contents: string } | { error: string } },
  ): string;
}

interface SolcOutput {
  errors?: { severity: 'error' | 'warning' | 'info'; formattedMessage: string }[];
  contracts?: Record<
    string,
    Record<string, { abi: Abi; evm: { bytecode: { object: string }; deployedBytecode: { object: string } } }>
  >;
}

const require = createRequire(import.meta.url);

/** The sources in this folder that become artifacts, by contract name. */
export const contractSources = {
  TestUSDC: 'TestUSDC.sol',
  Multicall3: 'Multicall3.sol',
  InertDelegator: 'InertDelegator.sol',
  GasHungryDelegator: 'GasHungryDelegator.sol',
  X402UptoPermit2Proxy: 'X402UptoPermit2Proxy.sol',
} as const;
export type ContractName = keyof typeof contractSources;

// Fixed settings: the committed artifacts are only reproducible if these never drift.
const settings = {
  optimizer: { enabled: true, runs: 200 },
  evmVersion: 'cancun',
  outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object', 'evm.deployedBytecode.object'] } },
};

/** Compiles one contract of this folder with solc-js, resolving imports (OpenZeppelin) from node_modules. */
export function compileContract(name: ContractName): ContractArtifact {
  const solc = require('solc') as Solc;
  const sourceFile = contractSources[name];
  const input = {
    language: 'Solidity',
    sources: { [sourceFile]: { content: readFileSync(new URL(sourceFile, import.meta.url), 'utf8') } },
    settings,
  };
  const output = JSON.parse(solc.compile(JSON.stringify(input), { import: readImport })) as SolcOutput;
  const errors = (output.errors ?? []).filter((e) => e.severity === 'error');
  if (errors.length > 0) throw new Error(errors.map((e) => e.formattedMessage).join('\n'));
  const contract = output.contracts?.[sourceFile]?.[name];
  if (!contract) throw new Error(`solc produced no contract ${name} from ${sourceFile}`);
  return {
    contractName: name,
    compiler: `solc-js ${solc.version()}`,
    abi: contract.abi,
    bytecode: `0x${contract.evm.bytecode.object}`,
    deployedBytecode: `0x${contract.evm.deployedBytecode.object}`,
  };
}

/** The committed artifact module: typed (`as const`) so viem infers function names and argument types. */
export function renderArtifactModule(name: ContractName): string {
  const artifact = compileContract(name);
  return [
    `// Generated from ../${contractSources[name]} by \`npm run contracts:build\`; do not edit.`,
    `export const artifact = ${JSON.stringify(artifact, null, 2)} as const;`,
    '',
  ].join('\n');
}

export function artifactModulePath(name: ContractName): URL {
  return new URL(`artifacts/${name}.ts`, import.meta.url);
}

function readImport(path: string): { contents: string } | { error: string } {
  try {
    return { contents: readFileSync(require.resolve(path), 'utf8') };
  } catch (err) {
    return { error: `cannot resolve import ${path}: ${(err as Error).message}` };
  }
}
