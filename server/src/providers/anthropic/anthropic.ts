/**
 * Anthropic Messages API (POST /v1/messages) behind the OpenAI chat shape.
 *
 * Choices the OpenAI shape leaves open:
 * - `response_format: json_object` becomes a system instruction, not an assistant prefill: a
 *   prefill is refused with extended thinking and would have to be glued back onto the answer.
 * - `response_format: json_schema` (Structured Outputs) goes as Anthropic's own structured outputs,
 *   `output_config.format` (generally available, no beta header), with the schema as given: one
 *   Anthropic does not support (an object without `additionalProperties: false`, say) is refused by
 *   Anthropic, and that refusal reported as any other. The JSON comes back as text. A format
 *   without `schema` is JSON mode.
 * - `temperature` is capped at 1 (Anthropic's range is 0..1, OpenAI's 0..2). Which sampling
 *   parameters reach Anthropic is the catalog's `sampling` (current Claude models refuse them all).
 * - Penalties and `seed` have no Anthropic equivalent and are dropped without error. A stop sequence
 *   of whitespace only (Anthropic refuses it) is a 400 naming `stop` before any payment: dropped, it
 *   would let the model run on to `max_tokens`, output the payer asked not to pay for.
 * - `reasoning_effort` turns extended thinking on for Claude models that have it, with a budget that
 *   leaves the answer room (see claude-thinking.ts); `temperature` and `top_k` are then not sent.
 * - A final assistant turn (a prefill) is sent without trailing whitespace, which Anthropic refuses.
 * - A `file` part (`file_data`, a data URL) is a `document` block: a PDF as a base64 source, a text
 *   file as a text source; another type is a 400 naming the part, as is `input_audio` (Claude takes
 *   no audio).
 * - Inline images go only in the types Anthropic takes (JPEG, PNG, GIF, WebP); another is a 400
 *   naming the part. `user` goes as `metadata.user_id` when Anthropic takes it (256 characters at most).
 * - Empty texts are left out (Anthropic refuses empty text blocks), and messages left empty with
 *   them; a conversation with no turn left is a 400 before any payment. A tool result left empty
 *   goes without `content`, which is optional on a `tool_result`.
 * - A tool's `parameters` without `type` (OpenAI takes them so) are sent with `type: "object"`,
 *   which Anthropic requires of an `input_schema`.
 * - A tool's `strict: true` goes as Anthropic's own `strict` (strict tool use, part of its structured
 *   outputs): the call's input then follows the schema.
 * - `cache_control` on a content part, a message (its last block) or a tool goes on the Anthropic
 *   block or tool it stands for (see prompt-cache.ts); with ANTHROPIC_AUTO_CACHE a request marking
 *   none gets breakpoints after its instructions and its history.
 * - Thinking is not content: it comes as `reasoning` and `reasoning_details` (OpenRouter's shape,
 *   signatures included), and `reasoning_details` given back on an assistant message go as its
 *   thinking blocks (which Anthropic wants back in a tool loop). Its tokens are in `output_tokens`,
 *   reported as reasoning tokens as far as the thinking text tells (Anthropic does not split them).
 * - `max_tokens` is the limit admission decided, whatever the client asked for.
 */
import type { CatalogModel } from '../../catalog/catalog.js';
import {
  fileSource,
  type ImageTypes,
  imageSource,
  isInstruction,
  JSON_MODE_INSTRUCTION,
  laterInstruction,
  noTurnsError,
  toolArguments,
} from '../message-parts.js';
import type { ChatMessage, ChatRequest, FilePart, FinishReason, ToolChoice } from '../openai-types.js';
import type { ProviderFamily, ProviderRequest, StreamDecoder } from '../provider-family.js';
import { reportedFailure } from '../reported-failure.js';
import type { EventSourceMessage } from '../sse.js';
import {
  type MeteredUsage,
  ProviderError,
  type StreamPart,
  UntranslatableRequestError,
  type UpstreamLimits,
} from '../types.js';
import { GeneratedText, zeroUsage } from '../usage.js';
import { claudeThinking, MIN_TOP_P_WITH_THINKING, thinkingBudget } from './claude-thinking.js';
import {
  type AnthropicCacheControl,
  anthropicCacheControl,
  checkBreakpoints,
  markStablePrefix,
} from './prompt-cache.js';

export const ANTHROPIC_VERSION = '2023-06-01';

const IMAGE_TYPES: ImageTypes = {
  provider: 'Anthropic',
  mediaTypes: ['image/jpeg', 'image/png', 'image/gif', 'image/webp'],
};

const DOCUMENT_TYPES: ImageTypes = { provider: 'Anthropic', mediaTypes: ['application/pdf', 'text/plain'] };

/** The longest `metadata.user_id` Anthropic takes; a longer one is a 400 for the whole request. */
const MAX_USER_ID = 256;

interface Cacheable {
  cache_control?: AnthropicCacheControl;
}

interface TextBlock extends Cacheable {
  type: 'text';
  text: string;
}

type ContentBlock = Cacheable &
  (
    | TextBlock
    | {
        type: 'image';
        source: { type: 'base64'; media_type: string; data: string } | { type: 'url'; url: string };
      }
    | {
        type: 'document';
        source:
          | { type: 'base64'; media_type: 'application/pdf'; data: string }
          | { type: 'text'; media_type: 'text/plain'; data: string };
        title?: string;
      }
    | { type: 'tool_use'; id: string; name: string; input: Record<string, unknown> }
    | { type: 'thinking'; thinking: string; signature: string }
    | { type: 'redacted_thinking'; data: string }
    | { type: 'tool_result'; tool_use_id: string; content?: string | TextBlock[] }
  );

export interface AnthropicMessage {
  role: 'user' | 'assistant';
  content: ContentBlock[];
}

export interface AnthropicUsage {
  input_tokens?: number | null;
  output_tokens?: number | null;
  cache_read_input_tokens?: number | null;
  cache_creation_input_tokens?: number | null;
}

export interface AnthropicOptions {
  /** ANTHROPIC_AUTO_CACHE: cache breakpoints for requests that mark none (see prompt-cache.ts). */
  autoCache?: boolean;
}

export function anthropicFamily(apiKey: string | undefined, options: AnthropicOptions = {}): ProviderFamily {
  return {
    request: (call) => {
      const body = anthropicRequestBody(call.request, call.model, options);
      return (limits) => ({
        path: '/v1/messages',
        headers: { 'anthropic-version': ANTHROPIC_VERSION, ...(apiKey && { 'x-api-key': apiKey }) },
        body: body(limits),
      });
    },
    streamDecoder: () => new AnthropicStreamDecoder(),
  };
}

/** The request translated (or refused), waiting for the limits admission decides; always streamed. */
export function anthropicRequestBody(
  request: ChatRequest,
  model: CatalogModel,
  options: AnthropicOptions = {},
): (limits: UpstreamLimits) => ProviderRequest['body'] {
  const { system, messages } = anthropicMessages(request.messages);
  const format = request.response_format;
  const schema = format?.type === 'json_schema' ? format.json_schema.schema : undefined;
  if (format?.type === 'json_object' || (format?.type === 'json_schema' && schema === undefined))
    system.push({ type: 'text', text: JSON_MODE_INSTRUCTION });
  const stop = stopSequences(request.stop);
  const tools = (request.tools ?? []).map(({ function: fn, cache_control }, i) => ({
    name: fn.name,
    ...(fn.description !== undefined && { description: fn.description }),
    input_schema: { type: 'object', ...(fn.parameters ?? { properties: {} }) },
    ...(fn.strict === true && { strict: true }),
    ...anthropicCacheControl(cache_control, `tools[${i}].cache_control`),
  }));
  if (checkBreakpoints({ tools, system, messages }) === 0 && options.autoCache)
    markStablePrefix({ tools, system, messages });
  const thinking = claudeThinking(request, model, messages);
  const fixed = {
    model: model.providerModel,
    messages,
    ...(system.length > 0 && { system }),
    ...(stop.length > 0 && { stop_sequences: stop }),
    ...(tools.length > 0 && {
      tools,
      tool_choice: anthropicToolChoice(request.tool_choice ?? 'auto', request.parallel_tool_calls === false),
    }),
    ...((schema !== undefined || (thinking && 'effort' in thinking)) && {
      output_config: {
        ...(schema !== undefined && { format: { type: 'json_schema', schema } }),
        ...(thinking && 'effort' in thinking && { effort: thinking.effort }),
      },
    }),
    // Too long for Anthropic, the id is left out, not cut (cut ids could merge users): it only helps
    // Anthropic tell users apart, not worth the 400 it would make of the request.
    ...(request.user && request.user.length <= MAX_USER_ID && { metadata: { user_id: request.user } }),
    stream: true,
  };
  return ({ outputTokens }) => {
    const budget = thinking && 'share' in thinking ? thinkingBudget(thinking.share, outputTokens) : undefined;
    const thinks = budget !== undefined || (thinking !== undefined && 'effort' in thinking);
    return {
      ...fixed,
      ...(!thinks && { messages: withoutThinking(messages) }),
      max_tokens: outputTokens,
      ...(!thinks
        ? sampling(request)
        : {
            thinking:
              budget === undefined ? { type: 'adaptive' } : { type: 'enabled', budget_tokens: budget },
            // With thinking Anthropic refuses temperature and top_k, and a top_p below 0.95.
            ...(request.top_p != null &&
              request.top_p >= MIN_TOP_P_WITH_THINKING && { top_p: request.top_p }),
          }),
    };
  };
}

function sampling(request: ChatRequest): Record<string, number> {
  return {
    ...(request.temperature != null && { temperature: Math.min(request.temperature, 1) }),
    ...(request.top_p != null && { top_p: request.top_p }),
    ...(request.top_k != null && { top_k: request.top_k }),
  };
}

/** Empty stop sequences mean nothing and are left out; ones of whitespace only Anthropic refuses. */
function stopSequences(stop: ChatRequest['stop']): string[] {
  const sequences = [stop ?? []].flat().filter((sequence) => sequence !== '');
  if (sequences.some((sequence) => sequence.trim() === ''))
    throw new UntranslatableRequestError(
      'stop',
      'must contain a non-whitespace character for Anthropic models',
    );
  return sequences;
}

function anthropicToolChoice(choice: ToolChoice, oneCallOnly: boolean): Record<string, unknown> {
  if (choice === 'none') return { type: 'none' };
  const base =
    choice === 'auto'
      ? { type: 'auto' }
      : choice === 'required'
        ? { type: 'any' }
        : { type: 'tool', name: choice.function.name };
  return oneCallOnly ? { ...base, disable_parallel_tool_use: true } : base;
}

/**
 * System (and developer) messages before the first turn go to `system`, a block per text part; one
 * later in the conversation keeps its place as a text block of a user turn, tagged as system
 * instructions (Anthropic has no system turn). Tool results become `tool_result` blocks of a user
 * turn; consecutive turns of one role are merged, since Anthropic wants them alternating, and a
 * user turn's tool results come first in it, as Anthropic requires (a user message sent between
 * two tool results, such as a screenshot, follows them).
 */
export function anthropicMessages(messages: ChatMessage[]): {
  system: TextBlock[];
  messages: AnthropicMessage[];
} {
  const system: TextBlock[] = [];
  const turns: AnthropicMessage[] = [];
  messages.forEach((message, i) => {
    const at = `messages[${i}]`;
    if (isInstruction(message) && turns.length === 0) {
      system.push(...instructionBlocks(message, at, (text) => text));
      return;
    }
    const role = message.role === 'assistant' ? 'assistant' : 'user';
    const blocks = isInstruction(message)
      ? instructionBlocks(message, at, laterInstruction)
      : contentBlocks(message, at);
    if (blocks.length === 0) return;
    const last = turns.at(-1);
    if (last?.role === role) last.content.push(...blocks);
    else turns.push({ role, content: blocks });
  });
  trimPrefill(turns);
  if (turns.length === 0) throw noTurnsError();
  for (const turn of turns)
    if (turn.role === 'user')
      turn.content = [
        ...turn.content.filter((block) => block.type === 'tool_result'),
        ...turn.content.filter((block) => block.type !== 'tool_result'),
      ];
  return { system, messages: turns };
}

/**
 * A final assistant turn is a prefill, which Anthropic refuses when it ends in whitespace: its last
 * text is sent trimmed at the end, and left out (with the turn, if nothing is left) when blank.
 */
function trimPrefill(turns: AnthropicMessage[]): void {
  const last = turns.at(-1);
  if (last?.role !== 'assistant') return;
  for (let block = last.content.at(-1); block?.type === 'text'; block = last.content.at(-1)) {
    block.text = block.text.trimEnd();
    if (block.text !== '') break;
    last.content.pop();
  }
  if (last.content.length === 0) turns.pop();
}

/** An instruction's text parts as text blocks (`wrap` says how), their breakpoints kept. */
function instructionBlocks(message: ChatMessage, at: string, wrap: (text: string) => string): TextBlock[] {
  const { content } = message;
  const parts = typeof content === 'string' ? [{ type: 'text' as const, text: content }] : (content ?? []);
  const blocks = parts.flatMap((part, j): TextBlock[] =>
    part.type === 'text' && part.text !== ''
      ? [
          {
            type: 'text',
            text: wrap(part.text),
            ...anthropicCacheControl(part.cache_control, `${at}.content[${j}].cache_control`),
          },
        ]
      : [],
  );
  return withMessageBreakpoint(blocks, message, at);
}

/** A message's own `cache_control` marks its last block. */
function withMessageBreakpoint<Block extends Cacheable>(
  blocks: Block[],
  message: ChatMessage,
  at: string,
): Block[] {
  const last = blocks.at(-1);
  if (last && message.cache_control !== undefined)
    Object.assign(last, anthropicCacheControl(message.cache_control, `${at}.cache_control`));
  return blocks;
}

function contentBlocks(message: ChatMessage, at: string): ContentBlock[] {
  return withMessageBreakpoint(messageBlocks(message, at), message, at);
}

function messageBlocks(message: ChatMessage, at: string): ContentBlock[] {
  const { content } = message;
  if (message.role === 'tool') {
    const result =
      typeof content === 'string'
        ? content
        : (content ?? []).flatMap((part, j) =>
            part.type === 'text' && part.text !== ''
              ? [
                  {
                    type: 'text' as const,
                    text: part.text,
                    ...anthropicCacheControl(part.cache_control, `${at}.content[${j}].cache_control`),
                  },
                ]
              : [],
          );
    return [
      {
        type: 'tool_result',
        tool_use_id: message.tool_call_id ?? '',
        ...(result.length > 0 && { content: result }),
      },
    ];
  }
  const blocks: ContentBlock[] = message.role === 'assistant' ? thinkingBlocks(message) : [];
  if (typeof content === 'string') {
    if (content !== '') blocks.push({ type: 'text', text: content });
  } else {
    content?.forEach((part, j) => {
      const breakpoint = anthropicCacheControl(part.cache_control, `${at}.content[${j}].cache_control`);
      if (part.type === 'text') {
        if (part.text !== '') blocks.push({ type: 'text', text: part.text, ...breakpoint });
        return;
      }
      if (part.type === 'input_audio')
        throw new UntranslatableRequestError(
          `${at}.content[${j}]`,
          'cannot be input_audio: Anthropic models take no audio',
        );
      if (part.type === 'file') {
        blocks.push({ ...documentBlock(part, `${at}.content[${j}].file`), ...breakpoint });
        return;
      }
      const source = imageSource(part.image_url.url, `${at}.content[${j}].image_url.url`, IMAGE_TYPES);
      blocks.push({
        type: 'image',
        source:
          source.kind === 'url'
            ? { type: 'url', url: source.url }
            : { type: 'base64', media_type: source.mediaType, data: source.data },
        ...breakpoint,
      });
    });
  }
  message.tool_calls?.forEach((call, j) => {
    blocks.push({
      type: 'tool_use',
      id: call.id,
      name: call.function.name,
      input: toolArguments(call.function.arguments, `${at}.tool_calls[${j}].function.arguments`),
    });
  });
  return blocks;
}

/**
 * The thinking of an assistant turn, given back as the answer's `reasoning_details` carried it: a
 * signed thinking block, or a redacted one. Unsigned text Anthropic would refuse, and is left out.
 */
function thinkingBlocks(message: ChatMessage): ContentBlock[] {
  return (message.reasoning_details ?? []).flatMap((detail): ContentBlock[] => {
    if (detail.format !== undefined && detail.format !== FORMAT) return [];
    if (detail.type === 'reasoning.encrypted') return [{ type: 'redacted_thinking', data: detail.data }];
    return detail.signature
      ? [{ type: 'thinking', thinking: detail.text ?? '', signature: detail.signature }]
      : [];
  });
}

/** Thinking blocks given back are sent only when the request thinks too. */
function withoutThinking(turns: AnthropicMessage[]): AnthropicMessage[] {
  return turns.map((turn) => ({
    ...turn,
    content: turn.content.filter((block) => block.type !== 'thinking' && block.type !== 'redacted_thinking'),
  }));
}

/** A PDF as a base64 document, a text file as a text document (Anthropic's two inline sources). */
function documentBlock(part: FilePart, field: string): ContentBlock {
  const { mediaType, data } = fileSource(part, field, DOCUMENT_TYPES);
  const title = part.file.filename ? { title: part.file.filename } : {};
  if (mediaType === 'application/pdf')
    return { type: 'document', source: { type: 'base64', media_type: mediaType, data }, ...title };
  return {
    type: 'document',
    source: { type: 'text', media_type: 'text/plain', data: Buffer.from(data, 'base64').toString('utf8') },
    ...title,
  };
}

export function anthropicFinishReason(stopReason: string | null | undefined): FinishReason {
  switch (stopReason) {
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'length';
    case 'tool_use':
      return 'tool_calls';
    case 'refusal':
      return 'content_filter';
    default:
      return 'stop';
  }
}

/** Anthropic's buckets are already disjoint: `input_tokens` excludes cache reads and writes. */
function anthropicUsage(known: MeteredUsage, usage: AnthropicUsage | undefined): MeteredUsage {
  return {
    inputTokens: usage?.input_tokens ?? known.inputTokens,
    cacheReadTokens: usage?.cache_read_input_tokens ?? known.cacheReadTokens,
    cacheWriteTokens: usage?.cache_creation_input_tokens ?? known.cacheWriteTokens,
    outputTokens: usage?.output_tokens ?? known.outputTokens,
    reasoningTokens: 0,
    exact: known.exact,
  };
}

/** The `format` of Claude's reasoning details, as OpenRouter names it. */
const FORMAT = 'anthropic-claude-v1';

/** HTTP statuses of Anthropic's error types, for errors that arrive inside a stream. */
const ERROR_STATUS: Record<string, number> = {
  invalid_request_error: 400,
  authentication_error: 401,
  billing_error: 402,
  permission_error: 403,
  not_found_error: 404,
  request_too_large: 413,
  rate_limit_error: 429,
  api_error: 500,
  timeout_error: 504,
  overloaded_error: 529,
};

/**
 * Usage comes from `message_start` (input and cache counts) and each `message_delta`, whose
 * counts are cumulative: the last one seen is the best count of a stream that was cut short. The
 * output is stated only there (`message_start` says 1): cut before, it is estimated from the text.
 */
export class AnthropicStreamDecoder implements StreamDecoder {
  private metered = zeroUsage();
  private readonly generated = new GeneratedText();
  private outputStated = false;
  /** Content block index -> OpenAI tool call index. */
  private readonly toolIndex = new Map<number, number>();
  /** OpenAI tool call indexes that received arguments. */
  private readonly toolsWithArguments = new Set<number>();
  private finished = false;
  private stopped = false;

  /** UTF-8 bytes of the thinking text so far. */
  private thinkingBytes = 0;
  /** Content block index -> reasoning_details index (thinking and redacted thinking blocks). */
  private readonly reasoningIndex = new Map<number, number>();

  /**
   * Anthropic counts thinking in `output_tokens` without saying how much of it: the reasoning tokens
   * are estimated from the thinking text (4 bytes a token), at most the output. The bill is the same
   * (reasoning is priced as output unless the catalog says otherwise).
   */
  usage(): MeteredUsage {
    const usage =
      this.outputStated || this.metered.exact ? { ...this.metered } : this.generated.billedIn(this.metered);
    const reasoning = Math.min(usage.outputTokens, Math.ceil(this.thinkingBytes / 4));
    return { ...usage, outputTokens: usage.outputTokens - reasoning, reasoningTokens: reasoning };
  }

  decode(event: EventSourceMessage): StreamPart[] {
    const data = JSON.parse(event.data);
    switch (data.type) {
      case 'message_start':
        this.metered = anthropicUsage(this.metered, data.message?.usage);
        return [];
      case 'content_block_start':
        return this.blockStart(data.index, data.content_block);
      case 'content_block_delta':
        return this.blockDelta(data.index, data.delta);
      case 'message_delta':
        this.metered = anthropicUsage(this.metered, data.usage);
        if (data.usage?.output_tokens != null) this.outputStated = true;
        if (this.finished || data.delta?.stop_reason == null) return [];
        this.finished = true;
        return [{ type: 'finish', finishReason: anthropicFinishReason(data.delta.stop_reason) }];
      case 'message_stop':
        this.stopped = true;
        return [];
      case 'error':
        throw reportedFailure(ERROR_STATUS[String(data.error?.type ?? 'api_error')], data);
      case 'content_block_stop':
        return this.blockStop(data.index);
      default:
        // ping, and event types added after this was written
        return [];
    }
  }

  end(): StreamPart[] {
    if (!this.stopped) throw new ProviderError('the answer stream ended before message_stop', undefined);
    this.metered.exact = true;
    return this.finished ? [] : [{ type: 'finish', finishReason: 'stop' }];
  }

  private blockStart(
    index: number,
    block: { type: string; id?: string; name?: string; text?: string; data?: string },
  ): StreamPart[] {
    if (block.type === 'text' && block.text) {
      this.generated.add(block.text);
      return [{ type: 'delta' as const, content: block.text }];
    }
    if (block.type === 'thinking') this.reasoningIndex.set(index, this.reasoningIndex.size);
    if (block.type === 'redacted_thinking' && block.data) {
      this.reasoningIndex.set(index, this.reasoningIndex.size);
      return [
        {
          type: 'delta',
          reasoningDetails: [
            {
              type: 'reasoning.encrypted',
              data: block.data,
              index: this.reasoningIndex.size - 1,
              format: FORMAT,
            },
          ],
        },
      ];
    }
    if (block.type !== 'tool_use') return [];
    const toolIndex = this.toolIndex.size;
    this.toolIndex.set(index, toolIndex);
    return [
      {
        type: 'delta' as const,
        toolCalls: [
          {
            index: toolIndex,
            id: block.id,
            type: 'function' as const,
            function: { name: block.name, arguments: '' },
          },
        ],
      },
    ];
  }

  /**
   * A tool call without input streams no argument text: its arguments end as `{}` (what the whole
   * answer says, and what clients parse), not as an empty string.
   */
  private blockStop(index: number): StreamPart[] {
    const toolIndex = this.toolIndex.get(index);
    if (toolIndex === undefined || this.toolsWithArguments.has(toolIndex)) return [];
    return [{ type: 'delta', toolCalls: [{ index: toolIndex, function: { arguments: '{}' } }] }];
  }

  private blockDelta(
    index: number,
    delta: { type: string; text?: string; partial_json?: string; thinking?: string; signature?: string },
  ): StreamPart[] {
    if (delta.type === 'text_delta' && delta.text) {
      this.generated.add(delta.text);
      return [{ type: 'delta', content: delta.text }];
    }
    const toolIndex = this.toolIndex.get(index);
    if (delta.type === 'input_json_delta' && delta.partial_json && toolIndex !== undefined) {
      this.generated.add(delta.partial_json);
      this.toolsWithArguments.add(toolIndex);
      return [
        { type: 'delta', toolCalls: [{ index: toolIndex, function: { arguments: delta.partial_json } }] },
      ];
    }
    // Not part of the OpenAI answer; thinking is output all the same.
    const reasoningIndex = this.reasoningIndex.get(index);
    if (delta.type === 'thinking_delta' && delta.thinking && reasoningIndex !== undefined) {
      this.generated.add(delta.thinking);
      this.thinkingBytes += Buffer.byteLength(delta.thinking);
      const text = delta.thinking;
      return [
        {
          type: 'delta',
          reasoning: text,
          reasoningDetails: [{ type: 'reasoning.text', text, index: reasoningIndex, format: FORMAT }],
        },
      ];
    }
    if (delta.type === 'signature_delta' && delta.signature && reasoningIndex !== undefined)
      return [
        {
          type: 'delta',
          reasoningDetails: [
            { type: 'reasoning.text', signature: delta.signature, index: reasoningIndex, format: FORMAT },
          ],
        },
      ];
    return [];
  }
}
