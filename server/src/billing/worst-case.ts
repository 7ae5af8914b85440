import type { CatalogModel, ModelPricing } from '../catalog/catalog.js';
import type { ChatRequest } from '../providers/openai-types.js';
import { zeroUsage } from '../providers/usage.js';
import { costOf, pricesFor } from './pricing.js';

// The most a request can cost, known before it is forwarded. Every token a provider counts covers
// at least one byte of what it was sent (byte-level BPE, SentencePiece with byte fallback), so the
// UTF-8 bytes of the request's JSON, images left out, bound its text, tool definitions and message
// framing (and text files and audio, given as base64: audio is billed per second, at far fewer
// tokens than its bytes); each image counts at its model's documented maximum, and a request
// carrying a document (a PDF) at its model's whole context. The prompt is billed at most at the
// dearest of the input and cache prices, the output (reasoning included: it counts against the
// same limit) at the dearer of the output and reasoning prices, and a prompt that may pass a long-
// prompt threshold at the tier's prices.

/**
 * Tokens a provider adds to a prompt with tools or a response format, beyond the request's own bytes
 * (Anthropic documents a tool-use system prompt of up to 346 tokens).
 */
const INSTRUCTIONS_OVERHEAD_TOKENS = 512;

/** The largest prompt a request can be billed for, in tokens. */
export function promptTokenBound(
  request: ChatRequest,
  model: Pick<CatalogModel, 'contextLength' | 'maxImageTokens'>,
): number {
  const images = new Set<object>();
  for (const message of request.messages) {
    if (!Array.isArray(message.content)) continue;
    for (const part of message.content) {
      if (part.type === 'image_url') images.add(part.image_url);
      // A PDF is billed by its pages (Claude: their text plus an image of each), which its bytes do
      // not bound (a page of text compresses to a few hundred bytes): it may fill the context.
      else if (part.type === 'file' && !isTextFile(part.file.file_data)) return model.contextLength;
    }
  }
  // An image's data is left out as the body is serialized: 30 MB of it would block the loop ~0.1 s.
  const json =
    images.size === 0
      ? JSON.stringify(request)
      : JSON.stringify(request, function (this: object, key, value) {
          return key === 'url' && images.has(this) ? '' : value;
        });
  const textBytes = Buffer.byteLength(json);
  const overhead = request.tools?.length || request.response_format ? INSTRUCTIONS_OVERHEAD_TOKENS : 0;
  // A longer prompt is refused by the provider, unbilled.
  return Math.min(model.contextLength, textBytes + images.size * model.maxImageTokens + overhead);
}

/** A text file's tokens are bounded by its bytes, which its data URL (in the request's JSON) outnumbers. */
function isTextFile(fileData: string | undefined): boolean {
  return fileData?.toLowerCase().startsWith('data:text/') ?? false;
}

/** A request's worst case: its prompt bound, its output limit, and what both can cost (pico-USD). */
export interface WorstCase {
  promptTokens: number;
  outputTokens: number;
  picoUsd: bigint;
}

/** The prices a request's worst case is taken at: per bucket, the dearest a token of it can cost. */
function worstPrices(pricing: ModelPricing, promptTokens: number): { prompt: bigint; output: bigint } {
  const prices = pricesFor(pricing, { ...zeroUsage(), inputTokens: promptTokens });
  return {
    prompt: max(prices.input, prices.cacheRead, prices.cacheWrite),
    output: max(prices.output, prices.reasoning),
  };
}

export function worstCase(
  pricing: ModelPricing,
  promptTokens: number,
  outputTokens: number,
  commissionBps: number,
): WorstCase {
  const { prompt, output } = worstPrices(pricing, promptTokens);
  const usage = { ...zeroUsage(), inputTokens: promptTokens, outputTokens };
  const prices = { input: prompt, output, cacheRead: prompt, cacheWrite: prompt, reasoning: output };
  return { promptTokens, outputTokens, picoUsd: costOf(usage, prices, commissionBps).totalPicoUsd };
}

/**
 * The most output tokens (at most `ceiling`) whose worst case with `promptTokens` costs at most
 * `budgetPicoUsd`; 0 when not even one fits.
 */
export function affordableOutputTokens(
  pricing: ModelPricing,
  promptTokens: number,
  budgetPicoUsd: bigint,
  commissionBps: number,
  ceiling: number,
): number {
  const cost = (tokens: number) => worstCase(pricing, promptTokens, tokens, commissionBps).picoUsd;
  if (cost(0) > budgetPicoUsd) return 0;
  const { prompt, output } = worstPrices(pricing, promptTokens);
  if (output === 0n) return ceiling;
  // Commission is a floor of a fraction of the provider's cost: this is at most one token too many.
  const providerBudget = (budgetPicoUsd * 10_000n) / (10_000n + BigInt(commissionBps));
  const fitting = (providerBudget - BigInt(promptTokens) * prompt) / output + 1n;
  let tokens = Math.max(0, Number(fitting < BigInt(ceiling) ? fitting : BigInt(ceiling)));
  while (tokens > 0 && cost(tokens) > budgetPicoUsd) tokens -= 1;
  return tokens;
}

function max(first: bigint, ...rest: bigint[]): bigint {
  let largest = first;
  for (const value of rest) if (value > largest) largest = value;
  return largest;
}
