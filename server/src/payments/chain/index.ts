export { type BalanceReader, balanceReader, usdcBalanceOf } from './balances.js';
export {
  type ChainClient,
  chainErrorReason,
  createChainClient,
  delegationEnvironment,
  isTransportFailure,
  shownReason,
} from './chain-client.js';
export {
  currentDelegatorNonce,
  DELEGATIONS_ABI_TYPE,
  decodeAcceptedCaveat,
  hashDelegation,
  isDelegationDisabled,
  ROOT_AUTHORITY,
  redeemDelegationCalldata,
  redeemDelegationsCalldata,
  redemptionsIn,
  SINGLE_DEFAULT_MODE,
} from './delegation-framework.js';
export {
  delegationDomain,
  deploysDeleGator,
  type PendingDeployment,
  type RedeemableSignature,
  redeemableSignature,
  verifyDelegationSignature,
} from './delegation-signature.js';
export { delegatorCode } from './delegator-account.js';
export { cappedGasLimit, GAS_CAPS, GasCapExceededError, gasCostPicoUsd } from './gas-caps.js';
export { aggregate3Calldata, MULTICALL3_ADDRESS, multicall3Deployed } from './multicall.js';
export { storeOnceSends } from './once-sends.js';
export {
  BroadcastError,
  NONCE_ATTEMPTS,
  nodeHolds,
  onSecondLook,
  type SignedTransaction,
  storeSendLock,
} from './relayer.js';
export { revertReason } from './revert-reason.js';
export {
  type BatchedCall,
  type BatchSent,
  type BatchTarget,
  type TransactionBatcher,
  transactionBatcher,
} from './transaction-batch.js';
export { paysTreasury } from './treasury-transfer.js';
