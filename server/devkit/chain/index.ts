import './no-analytics.js';

export { anvilDevKeys, type DevKey, type LocalChainAccounts, localChainAccounts } from './accounts.js';
export { type AnvilOptions, type AnvilProcess, anvilBinaryPath, startAnvil } from './anvil.js';
export {
  createLocalWalletClient,
  type LocalPublicClient,
  type LocalTestClient,
  type LocalWalletClient,
} from './clients.js';
export type { LocalDeployment } from './deployment.js';
export { createLocalChain, type LocalChain, type LocalChainOptions } from './local-chain.js';
export { createPayerAccount, type PayerAccount, type PayerAccountOptions } from './payer.js';
export { defaultSnapshotDir } from './snapshot.js';
export { emptyUsdc, mintUsdc, testUsdcAbi, testUsdcEip712, usdcBalance } from './usdc.js';
