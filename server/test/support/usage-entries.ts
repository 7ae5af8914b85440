import type { Address } from 'viem';
import type { NewUsageRecord } from '../../src/billing/ledger.js';
import type { PaymentRail } from '../../src/services/chat-contracts.js';

let sequence = 0;

/**
 * The usage record of a completed request (10 tokens in, 2 out; session rail unless said) costing
 * `totalPicoUsd`, all of it the provider's: what a test writes to the ledger as a debt.
 */
export function completedRequest(
  payer: Address,
  totalPicoUsd: bigint,
  options: { createdAt?: Date; rail?: PaymentRail } = {},
): NewUsageRecord {
  return {
    requestId: `completed-${++sequence}-${Date.now()}`,
    payer,
    rail: options.rail ?? 'session',
    model: 'anthropic/claude-sonnet-4.5',
    usage: {
      inputTokens: 10,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
      outputTokens: 2,
      reasoningTokens: 0,
      exact: true,
    },
    cost: { providerPicoUsd: totalPicoUsd, commissionPicoUsd: 0n, totalPicoUsd },
    createdAt: options.createdAt,
  };
}
