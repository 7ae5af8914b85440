/**
 * Anthropic prompt caching from the OpenAI shape: `cache_control` on content parts, messages and
 * tools (as OpenRouter and LiteLLM clients mark them) becomes Anthropic's own `cache_control` on
 * the blocks and tools they stand for. Anthropic bills a cache write at 1.25x the input price for
 * its 5-minute cache, which the catalog's `cacheWrite` states, and at 2x for its 1-hour cache, which
 * no catalog price states: a 1-hour breakpoint is refused rather than billed at the wrong price.
 */
import type { CacheControl } from '../openai-types.js';
import { UntranslatableRequestError } from '../types.js';

/** Anthropic's breakpoint. */
export interface AnthropicCacheControl {
  type: 'ephemeral';
}

/** The most breakpoints Anthropic takes in one request (it refuses more). */
export const MAX_BREAKPOINTS = 4;

/** Anthropic's breakpoint for the client's (`field` names it for the 400 a 1-hour one gets). */
export function anthropicCacheControl(
  control: CacheControl | undefined,
  field: string,
): { cache_control?: AnthropicCacheControl } {
  if (control === undefined) return {};
  if (control.ttl === '1h')
    throw new UntranslatableRequestError(
      `${field}.ttl`,
      'must be "5m" (or absent): 1-hour cache writes are billed at a price the catalog does not state',
    );
  return { cache_control: { type: 'ephemeral' } };
}

interface Marked {
  cache_control?: AnthropicCacheControl;
}

/** The blocks and tools of a request that can carry a breakpoint, tool results' inner blocks too. */
function markable(body: { tools?: Marked[]; system?: Marked[]; messages: Array<{ content: Marked[] }> }) {
  const blocks: Marked[] = [...(body.tools ?? []), ...(body.system ?? [])];
  for (const message of body.messages)
    for (const block of message.content) {
      blocks.push(block);
      const inner = (block as { content?: unknown }).content;
      if (Array.isArray(inner)) blocks.push(...(inner as Marked[]));
    }
  return blocks;
}

/** A request marking more breakpoints than Anthropic takes is a 400 before any payment. */
export function checkBreakpoints(body: Parameters<typeof markable>[0]): number {
  const count = markable(body).filter((block) => block.cache_control !== undefined).length;
  if (count > MAX_BREAKPOINTS)
    throw new UntranslatableRequestError(
      'cache_control',
      `may mark at most ${MAX_BREAKPOINTS} parts, messages or tools for Anthropic models (this request marks ${count})`,
    );
  return count;
}

/**
 * The operator's automatic caching (ANTHROPIC_AUTO_CACHE), for a request that marks nothing itself:
 * a breakpoint after the instructions (the last system block, or the last tool when there is no
 * system), which every request of an agent repeats, and one at the end of the conversation before
 * its final user turn, which the next request of the conversation repeats. The final turn itself is
 * left unmarked: a prompt that is never sent again would pay the write's 25% more for nothing.
 */
export function markStablePrefix(body: {
  tools?: Marked[];
  system?: Marked[];
  messages: Array<{ role: string; content: Marked[] }>;
}): void {
  const instructions = body.system?.at(-1) ?? body.tools?.at(-1);
  if (instructions) instructions.cache_control = { type: 'ephemeral' };
  const finalTurn = body.messages.findLastIndex((message) => message.role === 'user');
  const last = body.messages[finalTurn - 1]?.content.at(-1);
  if (last && (last as { type?: string }).type !== 'thinking') last.cache_control = { type: 'ephemeral' };
}
