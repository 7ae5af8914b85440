/**
 * `reasoning_effort` as Claude's extended thinking. Claude 4.6 and later: adaptive thinking at an
 * `output_config.effort`. Earlier models, as OpenRouter maps it: a thinking budget of a
 * share of the output limit (`minimal` 10%, `low` 20%, `medium` 50%, `high` 80%, `xhigh` 95%), at
 * least the 1,024 tokens Anthropic requires and below the limit, with at least 1,024 left for the
 * answer. Thinking counts against `max_tokens` and is billed as output.
 */
import type { CatalogModel } from '../../catalog/catalog.js';
import type { ChatRequest } from '../openai-types.js';
import { UntranslatableRequestError } from '../types.js';

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

/** Claude models with extended thinking by budget: 3.7 Sonnet and the Claude 4 models before 4.6. */
const THINKING_MODELS = /^claude-(3-7-sonnet|sonnet-4|opus-4|haiku-4)/;

/**
 * Claude 4.6 and later think adaptively, steered by `output_config.effort`: the later ones refuse a
 * budget (400), on 4.6 and 4.7 it is deprecated.
 */
const ADAPTIVE_MODELS = /^claude-(\w+-(4-[6-9]|[5-9])|fable|mythos)/;

/** OpenAI's efforts as Anthropic's (`max` only some models take, so `xhigh` stays `high`). */
const ADAPTIVE_EFFORTS: Record<string, 'low' | 'medium' | 'high'> = {
  minimal: 'low',
  low: 'low',
  medium: 'medium',
  high: 'high',
  xhigh: 'high',
};

/**
 * Anthropic wants the thinking blocks of an assistant turn that called tools passed back while the
 * loop goes on; a client that did not keep them (OpenAI clients do not) would get a 400 for every
 * turn of the loop, so such a turn is answered without thinking, as Anthropic allows.
 */
export interface ThinkingTurn {
  role: 'user' | 'assistant';
  content: Array<{ type: string }>;
}

/** How `request` asks Claude to think: a share of the output limit, an adaptive effort, or not at all. */
export type ClaudeThinking = { share: number } | { effort: 'low' | 'medium' | 'high' } | undefined;

export function claudeThinking(
  request: ChatRequest,
  model: CatalogModel,
  turns: ThinkingTurn[],
): ClaudeThinking {
  const effort = request.reasoning_effort;
  if (effort == null || effort === 'none') return undefined;
  const adaptive = ADAPTIVE_MODELS.test(model.providerModel);
  if (!adaptive && !THINKING_MODELS.test(model.providerModel)) return undefined;
  const choice = request.tool_choice;
  if ((request.tools?.length ?? 0) > 0 && (choice === 'required' || typeof choice === 'object'))
    throw new UntranslatableRequestError(
      'reasoning_effort',
      'cannot be given with tool_choice "required" or a named function for Claude models: extended thinking takes only "auto" or "none"',
    );
  if (inToolLoopWithoutThinking(turns)) return undefined;
  const anthropicEffort = ADAPTIVE_EFFORTS[effort];
  const share = EFFORT_SHARES[effort];
  if (adaptive) return anthropicEffort === undefined ? undefined : { effort: anthropicEffort };
  return share === undefined ? undefined : { share };
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
