import type { ChainClient } from '../chain/index.js';
import { inProcessFacilitator, type PaymentFacilitator, remoteFacilitator } from './facilitator.js';

export type { PaymentFacilitator } from './facilitator.js';
export { createX402Rail, OWED_HEADER, type X402Rail, type X402RailOptions } from './method.js';
export {
  finishUnfinishedX402Settlements,
  type ReconcileOutcome,
  reconcileX402Settlement,
} from './reconcile.js';

/** The facilitator the gateway uses: FACILITATOR_URL when set, else its own relayer in process. */
export function gatewayFacilitator(
  chain: ChainClient,
  facilitatorUrl?: string,
  confirmationTimeoutMs = 30_000,
): PaymentFacilitator {
  return facilitatorUrl
    ? remoteFacilitator(facilitatorUrl)
    : inProcessFacilitator(chain, { confirmationTimeoutMs });
}
