import type { Delegation } from '@metamask/smart-accounts-kit';
import type { Hex } from 'viem';
import { markSettlementsSent } from '../../billing/settlements.js';
import type { SettlementMetrics } from '../../observability/index.js';
import type { Store } from '../../store/database.js';
import {
  type BatchedCall,
  type ChainClient,
  redeemDelegationsCalldata,
  type TransactionBatcher,
  transactionBatcher,
} from '../chain/index.js';

/** One payer's settlement, simulated alone and ready to be sent with others. */
export interface BatchItem extends BatchedCall {
  settlementId: string;
  /** The payer's delegation to the session key, with the signature the DelegationManager verifies. */
  delegation: Delegation;
  /** The USDC `transfer` to the treasury its redemption executes. */
  transfer: Hex;
}

export type SettlementBatcher = TransactionBatcher<BatchItem>;

export interface SettlementBatcherOptions {
  store: Store;
  chain: Pick<ChainClient, 'publicClient' | 'relayer' | 'usdc' | 'environment'>;
  /** The most settlements one transaction carries. */
  maxItems?: number;
  /** The longest a batch waits for the one before it to be mined; then it is sent anyway (its nonce follows). */
  maxWaitMs: number;
  /** Where the queue's length is shown (/metrics). */
  metrics?: Pick<SettlementMetrics, 'batchQueue'>;
}

/**
 * Session settlements of different payers that fall due together go out in one `redeemDelegations`
 * (one redemption per payer, all reverting when one does: each is simulated first). Its rows are
 * marked sent on the shared transaction in one database transaction.
 */
export function settlementBatcher(options: SettlementBatcherOptions): SettlementBatcher {
  const { store, chain } = options;
  return transactionBatcher<BatchItem>({
    chain,
    maxItems: options.maxItems,
    maxWaitMs: options.maxWaitMs,
    queued: (items) => options.metrics?.batchQueue('session', items),
    target: {
      kind: 'sessionSettlement',
      call: (items) => ({
        to: chain.environment.DelegationManager,
        data: redeemDelegationsCalldata(
          items.map((item) => ({ delegation: item.delegation, target: chain.usdc, callData: item.transfer })),
        ),
      }),
      record: (items, tx) =>
        markSettlementsSent(
          store,
          items.map((item) => item.settlementId),
          tx,
        ),
    },
  });
}
