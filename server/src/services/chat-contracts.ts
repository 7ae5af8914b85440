import type { IncomingHttpHeaders } from 'node:http';
import type { Address } from 'viem';
import type { CatalogModel } from '../catalog/catalog.js';
import { GatewayError } from '../errors.js';
import type { ChatRequest, UsageCost } from '../providers/openai-types.js';
import type { MeteredUsage } from '../providers/types.js';

/**
 * The seams of the chat pipeline: who pays (PaymentGate, before forwarding) and what it cost
 * (UsageRecorder, after the provider answered and before the last byte goes out).
 */

export type PaymentRail = 'session' | 'x402';

export interface AdmissionRequest {
  headers: IncomingHttpHeaders;
  model: CatalogModel;
  request: ChatRequest;
  /** The served URL, used as the x402 `resource`. */
  url: string;
  requestId: string;
}

/** A payer let through: its debt is settled and it holds one in-flight slot until `release`. */
export interface Admission {
  payer: Address;
  rail: PaymentRail;
  /**
   * The output token limit to send upstream (in the provider's own field): the client's
   * `max_completion_tokens`/`max_tokens`, or when it set none, the largest the payer can pay for.
   * The request's worst-case cost, which admission checked, is computed with it.
   */
  outputTokens: number;
  /** Headers to send back (settlement triggered, x402 PAYMENT-RESPONSE, ...). */
  responseHeaders: Record<string, string>;
  /**
   * Headers stating what the payer owes once this request's usage is recorded (x402: the amount its
   * next proof must carry). Only a whole answer gets them: a stream's headers left before its usage.
   */
  owedHeaders?(): Promise<Record<string, string>>;
  /** Called once this request's usage is recorded, with its cost: the rail may start settling it. */
  recorded?(cost: StatedCost): void;
  release(): void;
}

/**
 * Identifies the payer and enforces the ordering rule: everything it owes is settled before
 * `admit` resolves. Throws GatewayError 401/402/429 when it may not proceed.
 */
export interface PaymentGate {
  admit(request: AdmissionRequest): Promise<Admission>;
}

export interface UsageEntry {
  requestId: string;
  payer: Address;
  rail: PaymentRail;
  model: CatalogModel;
  usage: MeteredUsage;
}

/** The price of one request, exact: USD decimal strings and pico-USD integer strings. */
export interface StatedCost {
  total: string;
  provider: string;
  commission: string;
  totalPicoUsd: string;
  providerPicoUsd: string;
  commissionPicoUsd: string;
}

/**
 * The cost as an answer's `usage` states it: `cost` a number in USD (OpenRouter's convention, which
 * clients such as LiteLLM read), rounded from the exact total; the exact amounts in `cost_details`.
 */
export function usageCost(cost: StatedCost): UsageCost {
  return {
    cost: Number(cost.total),
    cost_details: {
      total_usd: cost.total,
      provider_usd: cost.provider,
      commission_usd: cost.commission,
      total_pico_usd: cost.totalPicoUsd,
      provider_pico_usd: cost.providerPicoUsd,
      commission_pico_usd: cost.commissionPicoUsd,
    },
  };
}

/** Writes the usage record durably and returns its cost. */
export interface UsageRecorder {
  record(entry: UsageEntry): Promise<StatedCost>;
}

/** The gate of a gateway whose payments are not wired: chat is refused (503), never served for free. */
export const paymentsUnavailable: PaymentGate & UsageRecorder = {
  async admit() {
    throw new GatewayError('payments_unavailable', 'payments are not configured on this gateway');
  },
  async record() {
    throw new GatewayError('payments_unavailable', 'usage cannot be recorded: payments are not configured');
  },
};
