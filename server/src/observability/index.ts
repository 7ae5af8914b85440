export { installHttpMetrics, UNMATCHED_ROUTE } from './http-metrics.js';
export { readLedgerSnapshot } from './ledger-snapshot.js';
export {
  type BatchShare,
  createGatewayMetrics,
  type GatewayMetrics,
  type GatewayMetricsOptions,
  type LedgerSnapshot,
  type ProviderFailure,
  relayerCost,
  type SettlementMetrics,
  type SettlementOutcome,
  type TokenKind,
  type TransactionKind,
} from './metrics.js';
export { meteredProviders } from './provider-metrics.js';
export {
  type RelayerFunds,
  type RelayerRunway,
  relayerFunds,
  TYPICAL_SETTLEMENT_GAS,
} from './relayer-funds.js';
export { meteredRecorder } from './usage-metrics.js';
