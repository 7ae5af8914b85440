import type { ModelPricing, PriceSheet } from '../catalog/catalog.js';
import type { TokenUsage } from '../providers/types.js';
import { promptTokens } from '../providers/usage.js';

/** Catalog prices turned into pico-USD per token (USD per million tokens x 1e6). */
export interface TokenPrices {
  input: bigint;
  output: bigint;
  cacheRead: bigint;
  cacheWrite: bigint;
  reasoning: bigint;
}

/** The cost of one request in pico-USD: what the provider charges, our commission, their sum. */
export interface CostBreakdown {
  providerPicoUsd: bigint;
  commissionPicoUsd: bigint;
  totalPicoUsd: bigint;
}

const USD_PER_MILLION = /^(\d+)(?:\.(\d{1,6}))?$/;

/** "3.75" USD per million tokens -> 3_750_000n pico-USD per token, exactly. */
export function picoPerToken(usdPerMillion: string): bigint {
  const match = USD_PER_MILLION.exec(usdPerMillion);
  if (!match) throw new RangeError(`"${usdPerMillion}" is not a USD price with at most 6 decimals`);
  return BigInt(match[1]!) * 1_000_000n + BigInt((match[2] ?? '').padEnd(6, '0'));
}

/** Cache reads and writes default to the input price, reasoning to the output price. */
export function tokenPrices(sheet: PriceSheet): TokenPrices {
  const input = picoPerToken(sheet.input);
  const output = picoPerToken(sheet.output);
  return {
    input,
    output,
    cacheRead: sheet.cacheRead === undefined ? input : picoPerToken(sheet.cacheRead),
    cacheWrite: sheet.cacheWrite === undefined ? input : picoPerToken(sheet.cacheWrite),
    reasoning: sheet.reasoning === undefined ? output : picoPerToken(sheet.reasoning),
  };
}

/**
 * The prices of one request: a prompt longer than the model's long-prompt threshold has every token
 * priced at the tier (so Google bills Gemini 2.5 Pro), any other prompt the base sheet.
 */
export function pricesFor(pricing: ModelPricing, usage: TokenUsage): TokenPrices {
  const tier = pricing.longPrompt;
  return tokenPrices(tier !== undefined && promptTokens(usage) > tier.aboveTokens ? tier : pricing);
}

/** Provider cost from the disjoint token buckets; commission rounded down to the pico. */
export function costOf(usage: TokenUsage, prices: TokenPrices, commissionBps: number): CostBreakdown {
  const providerPicoUsd =
    tokens(usage.inputTokens, 'inputTokens') * prices.input +
    tokens(usage.cacheReadTokens, 'cacheReadTokens') * prices.cacheRead +
    tokens(usage.cacheWriteTokens, 'cacheWriteTokens') * prices.cacheWrite +
    tokens(usage.outputTokens, 'outputTokens') * prices.output +
    tokens(usage.reasoningTokens, 'reasoningTokens') * prices.reasoning;
  if (!Number.isSafeInteger(commissionBps) || commissionBps < 0)
    throw new RangeError(`commissionBps must be a whole number >= 0, got ${commissionBps}`);
  const commissionPicoUsd = (providerPicoUsd * BigInt(commissionBps)) / 10_000n;
  return { providerPicoUsd, commissionPicoUsd, totalPicoUsd: providerPicoUsd + commissionPicoUsd };
}

function tokens(count: number, bucket: string): bigint {
  if (!Number.isSafeInteger(count) || count < 0)
    throw new RangeError(`${bucket} must be a whole number >= 0, got ${count}`);
  return BigInt(count);
}
