/**
 * `reasoning_effort` as Claude's extended thinking, as OpenRouter maps it: a thinking budget of a
 * share of the output limit (`minimal` 10%, `low` 20%, `medium` 50%, `high` 80%, `xhigh` 95%), at
 * least the 1,024 tokens Anthropic requires and below the limit, with at least 1,024 left for the
 * answer. Thinking counts against `max_tokens` and is billed as output.
 */
import type { CatalogModel } from '../catalog/catalog.js';
import type { ChatRequest } from './openai-types.js';
import { UntranslatableRequestError } from './types.js';

const EFFORT_SHARES: Record<string, number> = {
  minimal: 0.1,
  low: 0.2,
  medium: 0.5,
  high: 0.8,
  xhigh: 0.95,
};

/** The smallest budget Anthropic takes, and the least room an answer keeps beside the thinking. */
const MIN_BUDGET = 1_024;
const MIN_ANSWER = 1_024;

/** Claude models with extended thinking: 3.7 Sonnet and every Claude 4 model. */
const THINKING_MODELS = /^claude-(3-7-sonnet|sonnet-4|opus-4|haiku-4)/;

/**
 * Anthropic wants the thinking blocks of an assistant turn that called tools passed back while the
 * loop goes on; a client that did not keep them (OpenAI clients do not) would get a 400 for every
 * turn of the loop, so such a turn is answered without thinking, as Anthropic allows.
 */
export interface ThinkingTurn {
  role: 'user' | 'assistant';
  content: Array<{ type: string }>;
}

/** The share of the output limit `request` asks Claude to think with; undefined for no thinking. */
export function thinkingShare(
  request: ChatRequest,
  model: CatalogModel,
  turns: ThinkingTurn[],
): number | undefined {
  const effort = request.reasoning_effort;
  if (effort == null || effort === 'none' || !THINKING_MODELS.test(model.providerModel)) return undefined;
  const choice = request.tool_choice;
  if ((request.tools?.length ?? 0) > 0 && (choice === 'required' || typeof choice === 'object'))
    throw new UntranslatableRequestError(
      'reasoning_effort',
      'cannot be given with tool_choice "required" or a named function for Claude models: extended thinking takes only "auto" or "none"',
    );
  return inToolLoopWithoutThinking(turns) ? undefined : EFFORT_SHARES[effort];
}

function inToolLoopWithoutThinking(turns: ThinkingTurn[]): boolean {
  const last = turns.at(-1);
  const previous = turns.at(-2);
  return (
    last?.role === 'user' &&
    last.content.some((block) => block.type === 'tool_result') &&
    previous?.role === 'assistant' &&
    previous.content.some((block) => block.type === 'tool_use') &&
    previous.content[0]?.type !== 'thinking' &&
    previous.content[0]?.type !== 'redacted_thinking'
  );
}

/** The thinking budget for an output limit, or undefined when the limit leaves no room to think. */
export function thinkingBudget(share: number, outputTokens: number): number | undefined {
  const budget = Math.min(Math.max(Math.floor(outputTokens * share), MIN_BUDGET), outputTokens - MIN_ANSWER);
  return budget >= MIN_BUDGET ? budget : undefined;
}

/** Anthropic's range for `top_p` with thinking (it refuses `temperature` and `top_k` then). */
export const MIN_TOP_P_WITH_THINKING = 0.95;
