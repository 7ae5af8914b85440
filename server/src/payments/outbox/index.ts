export {
  awaitIfKnown,
  awaitReceipt,
  batchShare,
  finishEach,
  finishUnfinishedSettlements,
  OUTBOX_FAILURES,
  type OutboxDeps,
  reconcileSettlement,
  settleFromReceipt,
  signedTransactionOf,
} from './reconcile.js';
export {
  type RefusalReason,
  refusalFromRevert,
  SettlementRefusedError,
  SettlementRevertedError,
  SettlementUnavailableError,
} from './settlement-errors.js';
