import type { Settlement } from '../../billing/settlements.js';
import type { SessionTerms } from '../../client/types.js';
import type { GatewayConfig } from '../../config.js';
import type { GatewayError } from '../../errors.js';
import type { Store } from '../../store/database.js';
import type { PaymentMethod } from '../admission/index.js';
import type { ChainClient } from '../chain/index.js';
import { finishUnfinishedSettlements, type OutboxDeps } from '../outbox/index.js';
import { type Collector, type CollectorOptions, createCollector, sessionsEndingSoonMs } from './collector.js';
import type { SessionPolicy } from './delegation-policy.js';
import { createSessionAuthorizer, type SessionAuthorizer } from './session-authorization.js';
import { type SessionMethodOptions, sessionPaymentMethod } from './session-method.js';
import type { SessionSettlementDeps } from './session-settlement.js';
import { sessionTerms } from './session-terms.js';
import { settleOnCompletion } from './settle-on-completion.js';
import { settlementBatcher } from './settlement-batch.js';

export interface SessionRailOptions {
  config: GatewayConfig;
  store: Store;
  chain: ChainClient;
  authenticate: SessionMethodOptions['authenticate'];
  /** The x402 rail's 402 for a payer whose session cannot pay, when that rail is on. */
  demandPayment?(demand: { url: string; reason: string; amountAtomic: bigint }): Promise<GatewayError>;
  log: CollectorOptions['log'];
  /** Where each settlement's outcome and time are counted (/metrics). */
  metrics?: OutboxDeps['metrics'];
}

/** The session-key rail, assembled: authorization, the gate's payment method, recovery and the collector. */
export interface SessionRail {
  policy: SessionPolicy;
  authorizer: SessionAuthorizer;
  method: PaymentMethod;
  collector: Collector;
  terms(): Promise<SessionTerms>;
  /** The terms if the chain was reached already (a read starts otherwise): never waits on the RPC. */
  knownTerms(): SessionTerms | undefined;
  /** Start-up: finishes every settlement a previous run left pending or sent. */
  recover(): Promise<Settlement[]>;
  /** Shutdown: the collector starts no more rounds; resolves once its round under way ended. */
  stop(): Promise<void>;
  /** Shutdown, once no request runs: waits for the settlements of completed requests (settled on completion). */
  settled(): Promise<void>;
}

export function createSessionRail(options: SessionRailOptions): SessionRail {
  const { config, store, chain } = options;
  const policy: SessionPolicy = {
    chainId: chain.chainId,
    sessionKey: chain.relayer.address,
    usdc: chain.usdc,
    treasury: chain.treasury,
    environment: chain.environment,
    maxLifetimeSeconds: config.limits.sessionMaxLifetimeSeconds,
    minCapAtomic: config.limits.sessionMinCapAtomic,
  };
  const outbox: SessionSettlementDeps = {
    store,
    chain,
    receiptTimeoutMs: config.limits.settlementTimeoutMs,
    metrics: options.metrics,
    // One per gateway: the settlements of its payers that fall due together share a transaction.
    batcher: settlementBatcher({
      store,
      chain,
      maxWaitMs: config.limits.settlementBatchWaitMs,
      metrics: options.metrics,
    }),
  };
  const collection = {
    ...outbox,
    idleMs: config.limits.collectorIdleMs,
    intervalMs: config.limits.collectorIntervalMs,
  };
  // Near a session's end its debts are due at once: the collector takes them at its next run, and a
  // request completing then is settled at once, since that run may come after the delegation can pay.
  const onCompletion = settleOnCompletion({
    ...outbox,
    withPayerLock: store.withPayerLock,
    everyRequest: config.settleOnCompletion,
    sessionsEndingWithinMs: sessionsEndingSoonMs(collection),
    log: options.log,
  });
  const collector = createCollector({
    ...collection,
    withPayerLock: store.withPayerLock,
    leadership: store.leadership('collector'),
    batchSize: config.limits.collectorBatchSize,
    log: options.log,
  });
  let known: SessionTerms | undefined;
  const terms = async () => {
    known ??= await sessionTerms(chain, policy);
    return known;
  };
  return {
    policy,
    authorizer: createSessionAuthorizer(store, chain, policy),
    method: sessionPaymentMethod({
      ...outbox,
      authenticate: options.authenticate,
      adminToken: config.adminToken,
      demandPayment: options.demandPayment,
      settleOnCompletion: onCompletion,
      minSettlementPicoUsd: config.exposure.minSettlementPicoUsd,
    }),
    collector,
    terms,
    knownTerms() {
      if (!known) terms().catch(() => undefined);
      return known;
    },
    recover: () => finishUnfinishedSettlements(outbox, store.withPayerLock),
    stop: () => collector.stop(),
    settled: () => onCompletion.drain(),
  };
}
