import type { ChatCompletionUsage, UsageCost } from './openai-types.js';
import type { MeteredUsage, TokenUsage } from './types.js';

export function zeroUsage(exact = false): MeteredUsage {
  return {
    inputTokens: 0,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
    outputTokens: 0,
    reasoningTokens: 0,
    exact,
  };
}

/** Every prompt token, cached or not: what providers call the prompt (and price long prompts by). */
export function promptTokens(usage: TokenUsage): number {
  return usage.inputTokens + usage.cacheReadTokens + usage.cacheWriteTokens;
}

/** Every generated token, reasoning included. */
export function completionTokens(usage: TokenUsage): number {
  return usage.outputTokens + usage.reasoningTokens;
}

/**
 * The OpenAI usage object: prompt = input + cache read + cache write, completion = output + reasoning;
 * with what it cost once known.
 */
export function toOpenAIUsage(usage: TokenUsage, cost?: UsageCost): ChatCompletionUsage {
  const prompt = promptTokens(usage);
  const completion = completionTokens(usage);
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: {
      cached_tokens: usage.cacheReadTokens,
      cache_write_tokens: usage.cacheWriteTokens,
    },
    completion_tokens_details: { reasoning_tokens: usage.reasoningTokens },
    ...cost,
  };
}

/**
 * The text of an answer as it is generated (content, refusal, tool call arguments, reasoning), to
 * bill the output of a stream that broke off before the provider stated its count.
 */
export class GeneratedText {
  private bytes = 0;

  add(text: string): void {
    this.bytes += Buffer.byteLength(text);
  }

  /** `usage` with at least the output the text makes: its UTF-8 bytes / 4, rounded up. Inexact. */
  billedIn(usage: MeteredUsage): MeteredUsage {
    return { ...usage, outputTokens: Math.max(usage.outputTokens, Math.ceil(this.bytes / 4)), exact: false };
  }
}
