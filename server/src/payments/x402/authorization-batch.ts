import type { Address, Hex } from 'viem';
import { markSettlementsSent } from '../../billing/settlements.js';
import type { SettlementMetrics } from '../../observability/index.js';
import type { Store } from '../../store/database.js';
import {
  aggregate3Calldata,
  type BatchedCall,
  type ChainClient,
  MULTICALL3_ADDRESS,
  type TransactionBatcher,
  transactionBatcher,
} from '../chain/index.js';

/** One payer's EIP-3009 `transferWithAuthorization`, simulated alone from the relayer. */
export interface AuthorizationItem extends BatchedCall {
  call: { to: Address; data: Hex };
  /** The settlement it pays. */
  settlementId: string;
}

export type AuthorizationBatcher = TransactionBatcher<AuthorizationItem>;

export interface AuthorizationBatcherOptions {
  store: Store;
  chain: Pick<ChainClient, 'publicClient' | 'relayer'>;
  /** The longest a batch waits for the one before it to be mined (SETTLEMENT_BATCH_WAIT_MS). */
  maxWaitMs: number;
  metrics?: Pick<SettlementMetrics, 'batchQueue'>;
}

/**
 * x402 settlements of different payers that fall due together go out in one Multicall3 `aggregate3`.
 * Anyone may submit an EIP-3009 authorization, so Multicall3 calling the token is as good as the
 * relayer. Sent with `allowFailure`, an authorization that fails on chain (its payer's funds moved
 * after the estimate) fails alone; estimated without it, so one failing already is left out first.
 */
export function authorizationBatcher(options: AuthorizationBatcherOptions): AuthorizationBatcher {
  return transactionBatcher<AuthorizationItem>({
    chain: options.chain,
    maxWaitMs: options.maxWaitMs,
    queued: (items) => options.metrics?.batchQueue('x402', items),
    target: {
      kind: 'x402Settlement',
      call: (items, strict) => {
        const [only] = items;
        if (only && items.length === 1) return only.call;
        return {
          to: MULTICALL3_ADDRESS,
          data: aggregate3Calldata(
            items.map((item) => item.call),
            !strict,
          ),
        };
      },
      // All or none: a batch's signed transaction carries every item's authorization, so a row left
      // unmarked would be paid by a resend of it while its settlement is failed and owed again.
      record: (items, tx) =>
        markSettlementsSent(
          options.store,
          items.map((item) => item.settlementId),
          tx,
          { resigned: true },
        ),
    },
  });
}
