import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { type Address, isAddressEqual, type TransactionReceipt } from 'viem';
import type { PaymentRail } from '../services/chat-contracts.js';
import type { RelayerFunds, RelayerRunway } from './relayer-funds.js';

/** How a settlement attempt ended, as `paygate_settlements_total{status}` counts it. */
export type SettlementOutcome =
  /** Paid and confirmed on chain. */
  | 'confirmed'
  /** The payer's side: cap reached, delegation expired or revoked, balance too low, proof refused. */
  | 'refused'
  /** The gateway's side (chain unreachable, receipt late): the outbox finishes it later. */
  | 'unavailable'
  /** Anything else. */
  | 'failed';

/** What the payment code reports about settlements. */
export interface SettlementMetrics {
  /** One settlement attempt of a payer's debt ended; `seconds` from opening it to its outcome. */
  settled(rail: PaymentRail, outcome: SettlementOutcome, seconds: number): void;
  /** A settlement's transaction, waiting in the pool below the market's fees, was replaced with higher ones. */
  replaced(rail: PaymentRail): void;
  /** A transaction the gateway waited for was mined: its gas and fee count when the relayer sent it. */
  gasSpent(rail: PaymentRail, kind: TransactionKind, receipt: TransactionReceipt, share?: BatchShare): void;
  /** Settlements of the rail simulated and waiting for the next batch transaction, now. */
  batchQueue(rail: PaymentRail, settlements: number): void;
}

/** What a relayer transaction was for: paying a debt, or deploying a payer's smart account before it. */
export type TransactionKind = 'settlement' | 'deployment';

/**
 * Why an upstream call failed, as `paygate_provider_errors_total{reason}` counts it; `answer`: the
 * provider's answer itself reported the failure (an error event in its stream, a function call
 * Gemini could not make); `cut`: by the gateway's own shutdown deadline, not the provider.
 */
export type ProviderFailure =
  | 'timeout'
  | 'status_4xx'
  | 'status_5xx'
  | 'connection'
  | 'stream'
  | 'answer'
  | 'cut';

/** Why a stream's client was disconnected, as `paygate_stream_disconnects_total{reason}` counts it. */
export type StreamDisconnect =
  /** It took nothing of its stream for the stall time while some was waiting. */
  | 'stalled'
  /** It left more of its stream unread than one stream may hold. */
  | 'unread'
  /** All streams together held more unread bytes than the budget, this one the most. */
  | 'buffer_budget';

/** The ledger figures read on each scrape (kept cheap: small indexes only). */
export interface LedgerSnapshot {
  /** Completed requests not yet paid (unclaimed, or claimed by a settlement in flight), in pico-USD. */
  outstandingPicoUsd: bigint;
  /** Of it, unclaimed records of payers that never had a payment confirmed (the exposure to unproven payers). */
  unprovenOutstandingPicoUsd: bigint;
  /** Settlements opened or sent but not confirmed or failed yet. */
  unfinishedSettlements: number;
}

/**
 * The gateway's Prometheus instruments, on a registry of their own (one per app, so several apps
 * in one process, as in tests, never share counters).
 */
export interface GatewayMetrics extends SettlementMetrics {
  readonly registry: Registry;
  httpRequest(route: string, method: string, status: number, seconds: number): void;
  /** An upstream call ended: `outcome` ok, or why it failed. */
  providerCall(
    provider: string,
    mode: 'complete' | 'stream',
    outcome: 'ok' | ProviderFailure,
    seconds: number,
  ): void;
  providerFirstToken(provider: string, seconds: number): void;
  /** An upstream call completed without the provider stating its answer's usage. */
  usageUnreported(provider: string): void;
  /** A stream's client was disconnected for not reading it. */
  streamDisconnected(reason: StreamDisconnect): void;
  /** A usage record was written: its tokens by kind, and its cost. */
  usageRecorded(model: string, tokens: Readonly<Record<TokenKind, number>>, costPicoUsd: bigint): void;
  /** A chat request was answered with an error: its status, and why (a bounded set, see error-handling). */
  chatRefused(status: number, reason: string): void;
}

export type TokenKind = 'input' | 'cache_read' | 'cache_write' | 'output' | 'reasoning';

export interface GatewayMetricsOptions {
  /** Read on each scrape for the debt and settlement gauges. */
  ledger?: () => Promise<LedgerSnapshot>;
  /** Read on each scrape: the event streams open and what their clients left unread. */
  streams?: () => { streams: number; unreadBytes: number };
  /** Where a failed ledger read is reported (the gauges then read NaN for that scrape). */
  onLedgerError?: (error: unknown) => void;
  /** The relayer's ETH, read on scrape for its gauges; only transactions it sent count as gas spent. */
  relayer?: RelayerFunds;
}

// From a sub-millisecond refusal to a long streamed answer.
const HTTP_BUCKETS = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120,
];
const PROVIDER_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
// Around one block (0.2 s locally, 2 s on Base) up to the receipt timeout.
const SETTLEMENT_BUCKETS = [0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 2, 3, 5, 10, 30, 60];
// An EIP-3009 transfer (x402) takes about 80,000 gas, a delegation redemption 190,000-320,000.
const GAS_BUCKETS = [
  50_000, 75_000, 100_000, 150_000, 200_000, 250_000, 300_000, 400_000, 600_000, 1_000_000,
];
const PICO_PER_USD = 1e12;

export function createGatewayMetrics(options: GatewayMetricsOptions = {}): GatewayMetrics {
  const registry = new Registry();
  const registers = [registry];
  collectDefaultMetrics({ register: registry });

  const httpRequests = new Counter({
    name: 'paygate_http_requests_total',
    help: 'HTTP requests answered, by route template, method and status code',
    labelNames: ['route', 'method', 'status'] as const,
    registers,
  });
  const httpDuration = new Histogram({
    name: 'paygate_http_request_duration_seconds',
    help: 'Time from a request arriving to its answer ending (a stream: its last event), by route template',
    labelNames: ['route', 'method'] as const,
    buckets: HTTP_BUCKETS,
    registers,
  });
  const providerDuration = new Histogram({
    name: 'paygate_provider_request_duration_seconds',
    help: 'Time of an upstream call, to its whole answer (complete) or its last event (stream), by provider and outcome',
    labelNames: ['provider', 'mode', 'outcome'] as const,
    buckets: PROVIDER_BUCKETS,
    registers,
  });
  const providerErrors = new Counter({
    name: 'paygate_provider_errors_total',
    help: 'Upstream calls that failed, by provider and reason (timeout, status_4xx, status_5xx, connection, stream; answer: reported in the answer itself; cut: by the gateway at its shutdown deadline)',
    labelNames: ['provider', 'reason'] as const,
    registers,
  });
  const providerFirstToken = new Histogram({
    name: 'paygate_provider_time_to_first_token_seconds',
    help: 'Time from an upstream streaming call to its first content, by provider',
    labelNames: ['provider'] as const,
    buckets: PROVIDER_BUCKETS,
    registers,
  });
  const unreportedUsage = new Counter({
    name: 'paygate_provider_usage_unreported_total',
    help: 'Answers a provider completed without stating their usage, by provider: billed for the output estimated from their text, the prompt uncounted (an OpenAI-compatible upstream ignoring stream_options.include_usage)',
    labelNames: ['provider'] as const,
    registers,
  });
  const streamDisconnects = new Counter({
    name: 'paygate_stream_disconnects_total',
    help: 'Stream clients disconnected for not reading their answer, by reason (stalled, unread, buffer_budget); their answers are billed all the same',
    labelNames: ['reason'] as const,
    registers,
  });
  const tokens = new Counter({
    name: 'paygate_tokens_total',
    help: 'Tokens of recorded usage, by model and kind (input, cache_read, cache_write, output, reasoning)',
    labelNames: ['model', 'kind'] as const,
    registers,
  });
  const cost = new Counter({
    name: 'paygate_cost_usd_total',
    help: 'Cost of recorded usage (provider cost plus commission) in USD, by model; the ledger holds the exact amounts',
    labelNames: ['model'] as const,
    registers,
  });
  const settlements = new Counter({
    name: 'paygate_settlements_total',
    help: 'Settlement attempts of payer debts, by rail and outcome (confirmed, refused, unavailable, failed)',
    labelNames: ['rail', 'status'] as const,
    registers,
  });
  const settlementDuration = new Histogram({
    name: 'paygate_settlement_duration_seconds',
    help: 'Time from opening a settlement to its confirmation on chain, by rail',
    labelNames: ['rail'] as const,
    buckets: SETTLEMENT_BUCKETS,
    registers,
  });

  const replacements = new Counter({
    name: 'paygate_settlement_replacements_total',
    help: 'Settlement transactions replaced with higher fees after waiting in the pool below the market, by rail',
    labelNames: ['rail'] as const,
    registers,
  });

  const batchQueue = new Gauge({
    name: 'paygate_settlement_batch_queue',
    help: 'Settlements simulated and waiting to go out together in the next transaction (behind the one being mined), by rail',
    labelNames: ['rail'] as const,
    registers,
  });
  const gasUsed = new Histogram({
    name: 'paygate_settlement_gas_used',
    help: 'Gas used by each mined transaction the relayer sent (by each settlement, its share of a batch), by rail and kind (settlement, deployment)',
    labelNames: ['rail', 'kind'] as const,
    buckets: GAS_BUCKETS,
    registers,
  });
  const feeWei = new Counter({
    name: 'paygate_settlement_fee_wei_total',
    help: 'ETH the relayer paid for its mined transactions (each settlement its share of a batch), in wei (gas used x effective gas price, plus the L1 data fee on an OP-stack chain), by rail and kind',
    labelNames: ['rail', 'kind'] as const,
    registers,
  });
  const chatRefusals = new Counter({
    name: 'paygate_chat_refusals_total',
    help: 'Chat requests answered with an error, by status and reason (details.reason of a payment refusal such as cap_reached or requests_in_flight, else the error code; other for an unknown reason)',
    labelNames: ['status', 'reason'] as const,
    registers,
  });

  if (options.relayer) {
    const relayer = options.relayer;
    // One chain read per scrape feeds both gauges (cached by the relayer's funds besides).
    let pending: Promise<RelayerRunway | undefined> | undefined;
    const runway = () => {
      pending ??= relayer
        .runway()
        .catch(() => undefined)
        .finally(() => {
          pending = undefined;
        });
      return pending;
    };
    new Gauge({
      name: 'paygate_relayer_balance_wei',
      help: "The relayer's (SESSION_KEY_PRIVATE_KEY's address) ETH balance in wei, which pays every settlement's gas; NaN when the chain cannot be read",
      registers,
      async collect() {
        const current = await runway();
        this.set(current ? Number(current.balanceWei) : Number.NaN);
      },
    });
    new Gauge({
      name: 'paygate_relayer_settlements_left',
      help: "Settlements the relayer's balance still pays at the current gas price and the mean gas of a settlement (/health warns below RELAYER_MIN_SETTLEMENTS_LEFT)",
      registers,
      async collect() {
        const current = await runway();
        this.set(current ? current.settlementsLeft : Number.NaN);
      },
    });
  }

  if (options.streams) {
    const read = options.streams;
    new Gauge({
      name: 'paygate_streams_open',
      help: 'Event streams open to clients (answers being streamed, or buffered for slow clients)',
      registers,
      collect() {
        this.set(read().streams);
      },
    });
    new Gauge({
      name: 'paygate_stream_unread_bytes',
      help: 'Bytes of streamed answers held for clients that have not read them yet (kept to about STREAM_BUFFER_BUDGET_BYTES)',
      registers,
      collect() {
        this.set(read().unreadBytes);
      },
    });
  }

  if (options.ledger) {
    const read = options.ledger;
    // One ledger read per scrape feeds both gauges; prom-client collects them one after the other.
    let pending: Promise<LedgerSnapshot | undefined> | undefined;
    const snapshot = () => {
      pending ??= read()
        .catch((error: unknown) => {
          options.onLedgerError?.(error);
          return undefined;
        })
        .finally(() => {
          pending = undefined;
        });
      return pending;
    };
    new Gauge({
      name: 'paygate_debt_outstanding_usd',
      help: 'USD owed for completed requests and not yet confirmed paid, over every payer (before sub-cent credits)',
      registers,
      async collect() {
        const current = await snapshot();
        this.set(current ? Number(current.outstandingPicoUsd) / PICO_PER_USD : Number.NaN);
      },
    });
    new Gauge({
      name: 'paygate_debt_outstanding_unproven_usd',
      help: 'USD owed for completed requests by payers that never had a payment confirmed (part of paygate_debt_outstanding_usd)',
      registers,
      async collect() {
        const current = await snapshot();
        this.set(current ? Number(current.unprovenOutstandingPicoUsd) / PICO_PER_USD : Number.NaN);
      },
    });
    new Gauge({
      name: 'paygate_settlements_unfinished',
      help: 'Settlements opened or sent and not yet confirmed or failed',
      registers,
      async collect() {
        const current = await snapshot();
        this.set(current ? current.unfinishedSettlements : Number.NaN);
      },
    });
  }

  return {
    registry,
    httpRequest(route, method, status, seconds) {
      httpRequests.inc({ route, method, status });
      httpDuration.observe({ route, method }, seconds);
    },
    providerCall(provider, mode, outcome, seconds) {
      providerDuration.observe({ provider, mode, outcome: outcome === 'ok' ? outcome : 'error' }, seconds);
      if (outcome !== 'ok') providerErrors.inc({ provider, reason: outcome });
    },
    providerFirstToken(provider, seconds) {
      providerFirstToken.observe({ provider }, seconds);
    },
    usageUnreported(provider) {
      unreportedUsage.inc({ provider });
    },
    streamDisconnected(reason) {
      streamDisconnects.inc({ reason });
    },
    usageRecorded(model, counts, costPicoUsd) {
      for (const [kind, count] of Object.entries(counts)) if (count > 0) tokens.inc({ model, kind }, count);
      cost.inc({ model }, Number(costPicoUsd) / PICO_PER_USD);
    },
    settled(rail, outcome, seconds) {
      settlements.inc({ rail, status: outcome });
      if (outcome === 'confirmed') settlementDuration.observe({ rail }, seconds);
    },
    replaced(rail) {
      replacements.inc({ rail });
    },
    batchQueue(rail, settlements) {
      batchQueue.set({ rail }, settlements);
    },
    gasSpent(rail, kind, receipt, share) {
      // A remote facilitator's transactions are paid by its own key.
      if (options.relayer && !isAddressEqual(receipt.from, options.relayer.address)) return;
      const gas = shareOf(receipt.gasUsed, share);
      gasUsed.observe({ rail, kind }, Number(gas));
      feeWei.inc({ rail, kind }, Number(shareOf(transactionFeeWei(receipt), share)));
      options.relayer?.spent(kind, gas);
    },
    chatRefused(status, reason) {
      chatRefusals.inc({ status, reason });
    },
  };
}

/** What a mined transaction cost its sender: gas used x effective gas price, plus the L1 data fee its receipt states. */
function transactionFeeWei(receipt: Pick<TransactionReceipt, 'gasUsed' | 'effectiveGasPrice'>): bigint {
  return receipt.gasUsed * receipt.effectiveGasPrice + l1FeeOf(receipt);
}

/**
 * What a settlement's transaction cost the operator, as its settlement row keeps it: its gas and fee
 * when `relayer` sent it; sent by another key (a remote facilitator), no gas of the operator's and a fee of 0.
 */
export function relayerCost(
  receipt: Pick<TransactionReceipt, 'from' | 'gasUsed' | 'effectiveGasPrice'>,
  relayer: Address,
  share?: BatchShare,
): { gasUsed: bigint | null; feeWei: bigint } {
  if (!isAddressEqual(receipt.from, relayer)) return { gasUsed: null, feeWei: 0n };
  return { gasUsed: shareOf(receipt.gasUsed, share), feeWei: shareOf(transactionFeeWei(receipt), share) };
}

/** A settlement's place in a transaction that pays `count` settlements (a batch): `position` from 0. */
export interface BatchShare {
  count: number;
  position: number;
}

/**
 * A settlement's part of what a transaction paying several cost: an equal share, the division's
 * remainder on the first, so the shares of a batch add up to its cost exactly. The whole cost
 * without a batch (or for a settlement it does not carry).
 */
function shareOf(total: bigint, share?: BatchShare): bigint {
  if (!share || share.count <= 1 || share.position < 0) return total;
  const each = total / BigInt(share.count);
  return share.position === 0 ? each + (total % BigInt(share.count)) : each;
}

/** On an OP-stack chain (Base) the sender also pays the L1 data fee its receipt states (hex, unless viem's OP formatter read it). */
function l1FeeOf(receipt: object): bigint {
  const fee = (receipt as { l1Fee?: unknown }).l1Fee;
  if (typeof fee === 'bigint') return fee;
  return typeof fee === 'string' ? BigInt(fee) : 0n;
}
