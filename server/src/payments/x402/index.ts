import type { SettlementMetrics } from '../../observability/index.js';
import type { Store } from '../../store/database.js';
import type { ChainClient } from '../chain/index.js';
import { authorizationBatcher } from './authorization-batch.js';
import { inProcessFacilitator, type PaymentFacilitator, remoteFacilitator } from './facilitator.js';

export type { PaymentFacilitator } from './facilitator.js';
export { createX402Rail, OWED_HEADER, type X402Rail, type X402RailOptions } from './method.js';
export {
  finishUnfinishedX402Settlements,
  type ReconcileOutcome,
  reconcileX402Settlement,
} from './reconcile.js';

export interface GatewayFacilitatorOptions {
  /** Where the settlements of a batch are marked sent together. */
  store: Store;
  /** FACILITATOR_URL: a remote facilitator, which sends with its own key. */
  facilitatorUrl?: string;
  confirmationTimeoutMs?: number;
  /** SETTLEMENT_BATCH_WAIT_MS: settlements of different payers falling due together share a transaction. */
  batchWaitMs: number;
  metrics?: Pick<SettlementMetrics, 'batchQueue'>;
}

/** The facilitator the gateway uses: FACILITATOR_URL when set, else its own relayer in process. */
export function gatewayFacilitator(
  chain: ChainClient,
  options: GatewayFacilitatorOptions,
): PaymentFacilitator {
  if (options.facilitatorUrl) return remoteFacilitator(options.facilitatorUrl);
  return inProcessFacilitator(chain, {
    confirmationTimeoutMs: options.confirmationTimeoutMs ?? 30_000,
    // One per gateway: the settlements of its payers that fall due together share a transaction.
    batcher: authorizationBatcher({
      store: options.store,
      chain,
      maxWaitMs: options.batchWaitMs,
      metrics: options.metrics,
    }),
  });
}
