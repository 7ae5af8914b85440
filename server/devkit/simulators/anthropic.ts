/**
 * A simulator of the Anthropic Messages API (POST /v1/messages): the real SSE wire format (named
 * events; the input counts and an output of 1 in message_start, the final cumulative counts in
 * message_delta), the real error bodies. The gateway always streams; a whole (JSON) answer, at
 * once and without the scripted faults, is for benchmarks calling it directly.
 */
import { createHash } from 'node:crypto';
import {
  echoReply,
  type Frame,
  type LoggedRequest,
  pdfPages,
  piecesOf,
  randomId,
  replyToSend,
  retryAfterHeader,
  type ScriptedHttpError,
  type ScriptedReply,
  type ScriptStep,
  type Simulator,
  type SimulatorOptions,
  sendFrames,
  startSimulator,
  tokenCount,
} from './simulator-server.js';

export type AnthropicStopReason =
  | 'end_turn'
  | 'max_tokens'
  | 'stop_sequence'
  | 'tool_use'
  | 'refusal'
  | 'pause_turn';

export interface AnthropicWireUsage {
  input_tokens?: number;
  output_tokens?: number;
  cache_read_input_tokens?: number;
  cache_creation_input_tokens?: number;
}

export type AnthropicReply = ScriptedReply<AnthropicStopReason, AnthropicWireUsage> & {
  stopSequence?: string;
};
export type AnthropicStep = ScriptStep<AnthropicReply>;

const ERROR_TYPES: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'billing_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  504: 'timeout_error',
  529: 'overloaded_error',
};

type Block =
  | { type: 'thinking'; thinking: string; signature: string }
  | { type: 'text'; text: string }
  | { type: 'tool_use'; id: string; name: string; input: Record<string, unknown> };

export function startAnthropicSimulator(options: SimulatorOptions = {}): Promise<Simulator<AnthropicStep>> {
  const cache = new PromptCache();
  return startSimulator<AnthropicStep>(async (exchange, next) => {
    const body = exchange.request.body;
    const step = await replyToSend(exchange, refusalOf(exchange.request), next, () => defaultReply(body), {
      body: errorBody,
      headers: retryAfterHeader,
    });
    if (!step) return;
    const message = messageOf(body, step, cache.counts(body));
    if (body.stream !== true) return exchange.json(200, message);
    const error = frame('error', {
      type: 'error',
      error: { type: 'overloaded_error', message: 'Overloaded' },
    });
    await sendFrames(exchange, streamFrames(message, piecesOf(step.text)), step, error.text);
  }, options);
}

/** What the real API refuses before generating anything. */
function refusalOf(request: LoggedRequest): ScriptedHttpError | undefined {
  if (request.method !== 'POST' || request.path.split('?')[0] !== '/v1/messages')
    return { status: 404, message: 'Not Found' };
  if (!request.headers['x-api-key']) return { status: 401, message: 'x-api-key header is required' };
  if (!request.headers['anthropic-version'])
    return { status: 400, message: 'anthropic-version: header is required' };
  const body = request.body;
  if (typeof body !== 'object' || body === null)
    return { status: 400, message: 'There was an error parsing the body' };
  if (!Array.isArray(body.messages)) return { status: 400, message: 'messages: Field required' };
  if (!Number.isInteger(body.max_tokens)) return { status: 400, message: 'max_tokens: Field required' };
  return (
    unknownFieldOf(body) ??
    tooManyBreakpoints(body) ??
    thinkingRefusal(body) ??
    documentRefusal(body.messages) ??
    toolResultsAfterOtherContent(body.messages) ??
    emptyTextOf(body.messages) ??
    untypedToolOf(body.tools) ??
    outputFormatRefusal(body.output_config) ??
    samplingRefusal(body)
  );
}

/**
 * Claude Opus 4.7 and later (Fable, Mythos, Opus 5, Sonnet 5, Haiku 5) refuse sampling parameters
 * (under anthropic-version 2023-06-01, a `temperature` of 1, its default, alone passes); earlier
 * models since Claude 4.5 take `temperature` or `top_p`, not both.
 */
const NO_SAMPLING_MODEL = /^claude-(fable|mythos|opus-4-[78]|opus-5|sonnet-5|haiku-5)/;

function samplingRefusal(body: Record<string, unknown>): ScriptedHttpError | undefined {
  if (NO_SAMPLING_MODEL.test(String(body.model))) {
    const field = ['temperature', 'top_p', 'top_k'].find(
      (name) =>
        body[name] !== undefined && !(name === 'temperature' && body[name] === 1 && body.top_p === undefined),
    );
    return field === undefined
      ? undefined
      : { status: 400, message: `\`${field}\` is deprecated for this model.` };
  }
  if (body.temperature !== undefined && body.top_p !== undefined)
    return {
      status: 400,
      message: '`temperature` and `top_p` cannot both be specified for this model. Please use only one.',
    };
  return undefined;
}

/**
 * The top-level fields of the Messages API (without beta headers): any other is refused, as the
 * beta's `output_format` is since structured outputs moved to `output_config.format`.
 */
const MESSAGES_FIELDS = new Set([
  'model',
  'messages',
  'max_tokens',
  'system',
  'metadata',
  'stop_sequences',
  'stream',
  'temperature',
  'top_p',
  'top_k',
  'tools',
  'tool_choice',
  'thinking',
  'output_config',
  'service_tier',
  'container',
  'context_management',
  'mcp_servers',
]);

function unknownFieldOf(body: Record<string, unknown>): ScriptedHttpError | undefined {
  const field = Object.keys(body).find((key) => !MESSAGES_FIELDS.has(key));
  return field === undefined
    ? undefined
    : { status: 400, message: `${field}: Extra inputs are not permitted` };
}

/**
 * Structured outputs: `output_config.format` is `{type: "json_schema", schema}`, and every object of
 * the schema must say `additionalProperties: false` (checked here through `properties`, `items`,
 * `anyOf`, `allOf` and `$defs`, where schemas usually nest).
 */
function outputFormatRefusal(config: unknown): ScriptedHttpError | undefined {
  if (config === undefined) return undefined;
  const format = (config as { format?: { type?: unknown; schema?: unknown } } | null)?.format;
  if (format == null) return undefined;
  if (format.type !== 'json_schema')
    return { status: 400, message: "output_config.format.type: Input should be 'json_schema'" };
  if (typeof format.schema !== 'object' || format.schema === null || Array.isArray(format.schema))
    return { status: 400, message: 'output_config.format.schema: Field required' };
  return openObjectOf(format.schema)
    ? {
        status: 400,
        message:
          "output_config.format.schema: For 'object' type, 'additionalProperties' must be explicitly set to false",
      }
    : undefined;
}

/** Whether some object schema in `schema` lacks `additionalProperties: false`. */
function openObjectOf(schema: unknown): boolean {
  if (typeof schema !== 'object' || schema === null) return false;
  const node = schema as Record<string, unknown>;
  const types = [node.type].flat();
  if ((types.includes('object') || node.properties !== undefined) && node.additionalProperties !== false)
    return true;
  const children = [
    ...Object.values((node.properties as object | undefined) ?? {}),
    ...Object.values((node.$defs as object | undefined) ?? {}),
    ...[node.items, node.anyOf, node.allOf].flat(),
  ];
  return children.some(openObjectOf);
}

/** Models that think only adaptively: a thinking budget is a 400. */
const ADAPTIVE_ONLY_MODEL = /^claude-(fable|mythos|opus-5|sonnet-5|haiku-5)/;

/** What Anthropic refuses of a request with extended (budgeted or adaptive) thinking. */
// biome-ignore lint/suspicious/noExplicitAny: the request as the gateway sent it
function thinkingRefusal(body: any): ScriptedHttpError | undefined {
  const thinking = body.thinking;
  const refused = (message: string) => ({ status: 400, message });
  const effort = body.output_config?.effort;
  if (effort !== undefined && !['low', 'medium', 'high', 'max'].includes(effort))
    return refused("output_config.effort: Input should be 'low', 'medium', 'high' or 'max'");
  if (thinking?.type === 'enabled' && ADAPTIVE_ONLY_MODEL.test(String(body.model)))
    return refused(
      'thinking.type.enabled is not supported for this model. Use thinking.type.adaptive and output_config.effort to control thinking behavior.',
    );
  if (thinking?.type !== 'enabled' && thinking?.type !== 'adaptive') return undefined;
  if (
    thinking.type === 'enabled' &&
    (!Number.isInteger(thinking.budget_tokens) || thinking.budget_tokens < 1024)
  )
    return refused('thinking.enabled.budget_tokens: Input should be greater than or equal to 1024');
  if (thinking.type === 'enabled' && body.max_tokens <= thinking.budget_tokens)
    return refused('`max_tokens` must be greater than `thinking.budget_tokens`');
  if (body.temperature !== undefined && body.temperature !== 1)
    return refused('`temperature` may only be set to 1 when thinking is enabled');
  if (body.top_k !== undefined) return refused('`top_k` is not supported when thinking is enabled');
  if (body.top_p !== undefined && body.top_p < 0.95)
    return refused('`top_p` must be greater than or equal to 0.95 when thinking is enabled');
  if (body.tool_choice?.type === 'any' || body.tool_choice?.type === 'tool')
    return refused('Thinking may not be enabled when tool_choice forces tool use.');
  for (const [i, message] of (body.messages as Array<{ content: Array<Record<string, unknown>> }>).entries())
    for (const [j, block] of message.content.entries())
      if (block.type === 'thinking' && !String(block.signature ?? '').startsWith('sig_'))
        return refused(`messages.${i}.content.${j}: Invalid \`signature\` in \`thinking\` block`);
  const [previous, last] = (body.messages as Array<{ role: string; content: Array<{ type: string }> }>).slice(
    -2,
  );
  if (
    last?.role === 'user' &&
    last.content.some((block) => block.type === 'tool_result') &&
    previous?.role === 'assistant' &&
    previous.content.some((block) => block.type === 'tool_use') &&
    !['thinking', 'redacted_thinking'].includes(previous.content[0]?.type ?? '')
  )
    return refused(
      'messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`. When `thinking` is enabled, a final `assistant` message must start with a thinking block.',
    );
  return undefined;
}

/** Anthropic takes at most 4 blocks (tools, system, message blocks) with `cache_control`. */
function tooManyBreakpoints(body: Record<string, unknown>): ScriptedHttpError | undefined {
  const found = promptSegments(body).filter((segment) => segment.marked).length;
  return found > 4
    ? { status: 400, message: `A maximum of 4 blocks with cache_control may be provided. Found ${found}.` }
    : undefined;
}

/** One cacheable piece of a prompt, in Anthropic's prefix order: tools, system, then messages. */
interface Segment {
  /** The piece without its breakpoint: what a cached prefix must match. */
  key: string;
  tokens: number;
  marked: boolean;
}

// biome-ignore lint/suspicious/noExplicitAny: the request as the gateway sent it
function promptSegments(body: any): Segment[] {
  const segment = (block: Record<string, unknown>, tokens: number): Segment => {
    const { cache_control, ...rest } = block;
    return { key: JSON.stringify(rest), tokens, marked: cache_control != null };
  };
  const system =
    typeof body.system === 'string' ? [{ type: 'text', text: body.system }] : (body.system ?? []);
  return [
    ...(body.tools ?? []).map((tool: Record<string, unknown>) =>
      segment(tool, tokenCount(JSON.stringify(tool))),
    ),
    ...system.map((block: Record<string, unknown>) => segment(block, blockTokens(block))),
    ...(body.messages ?? []).flatMap((message: { role: string; content: unknown }) =>
      (typeof message.content === 'string'
        ? [{ type: 'text', text: message.content }]
        : (message.content as [])
      ).map((block: Record<string, unknown>, i: number) =>
        // The role is part of what is cached: a turn's first block says it.
        segment(i === 0 ? { ...block, role: message.role } : block, blockTokens(block)),
      ),
    ),
  ];
}

/**
 * The tokens of a block, as the simulators count them (tool uses and results by their text); a PDF
 * document as Anthropic bills one, about 1,500 tokens of text and 1,600 of image per page.
 */
function blockTokens(block: Record<string, unknown>): number {
  if (block.type === 'document') {
    const source = block.source as { type: string; data: string };
    return source.type === 'text' ? tokenCount(source.data) : pdfPages(source.data) * PDF_PAGE_TOKENS;
  }
  return tokenCount(textOf([block]));
}

const PDF_PAGE_TOKENS = 3_100;

/** Anthropic's document sources: base64 PDFs, plain text. */
function documentRefusal(messages: Array<{ content?: unknown }>): ScriptedHttpError | undefined {
  for (const [i, message] of messages.entries()) {
    if (!Array.isArray(message.content)) continue;
    for (const [j, block] of message.content.entries()) {
      if (block.type !== 'document') continue;
      const source = block.source ?? {};
      if (source.type === 'base64' && source.media_type !== 'application/pdf')
        return {
          status: 400,
          message: `messages.${i}.content.${j}.document.source.base64.media_type: Input should be 'application/pdf'`,
        };
      if (source.type === 'text' && source.media_type !== 'text/plain')
        return {
          status: 400,
          message: `messages.${i}.content.${j}.document.source.text.media_type: Input should be 'text/plain'`,
        };
    }
  }
  return undefined;
}

/** The shortest prefix Anthropic caches (Claude Sonnet's; a shorter one is processed uncached). */
const MIN_CACHEABLE_TOKENS = 1024;
/** How many blocks before a breakpoint Anthropic looks for a cached prefix. */
const LOOKBACK_BLOCKS = 20;

/**
 * Anthropic's prompt cache, without expiry: a request's prefix up to a breakpoint is written when
 * no cached prefix covers it, and read by a later request whose prompt starts with it (found at a
 * block boundary within 20 blocks before one of its breakpoints).
 */
class PromptCache {
  private readonly written = new Set<string>();

  // biome-ignore lint/suspicious/noExplicitAny: the request as the gateway sent it
  counts(body: any): { read: number; write: number; total: number } {
    const segments = promptSegments(body);
    const prefixTokens: number[] = [];
    const prefixKeys: string[] = [];
    let tokens = 0;
    let hash = createHash('sha256').update(String(body.model)).digest('hex');
    for (const segment of segments) {
      tokens += segment.tokens;
      hash = createHash('sha256').update(hash).update(segment.key).digest('hex');
      prefixTokens.push(tokens);
      prefixKeys.push(hash);
    }
    const marks = segments.flatMap((segment, i) => (segment.marked ? [i] : []));
    let read = 0;
    for (const mark of marks)
      for (let j = mark; j >= Math.max(0, mark - LOOKBACK_BLOCKS + 1); j--)
        if (this.written.has(prefixKeys[j]!)) read = Math.max(read, prefixTokens[j]!);
    const last = marks.at(-1);
    let write = 0;
    if (last !== undefined && prefixTokens[last]! >= MIN_CACHEABLE_TOKENS) {
      write = prefixTokens[last]! - read;
      for (const mark of marks)
        if (prefixTokens[mark]! >= MIN_CACHEABLE_TOKENS) this.written.add(prefixKeys[mark]!);
    }
    return { read, write, total: tokens };
  }
}

/** Anthropic refuses an empty text block, a tool result's included (its string content is one). */
function emptyTextOf(messages: Array<{ content?: unknown }>): ScriptedHttpError | undefined {
  const hasEmptyText = (blocks: unknown): boolean =>
    Array.isArray(blocks) &&
    blocks.some(
      (block) =>
        (block.type === 'text' && block.text === '') ||
        (block.type === 'tool_result' && (block.content === '' || hasEmptyText(block.content))),
    );
  if (messages.some((message) => hasEmptyText(message.content)))
    return { status: 400, message: 'messages: text content blocks must be non-empty' };
  return undefined;
}

/**
 * Anthropic requires `type` of a tool's `input_schema` (JSON Schema lets it be left out), and of a
 * strict tool's schema what structured outputs require (`additionalProperties: false` objects).
 */
function untypedToolOf(tools: unknown): ScriptedHttpError | undefined {
  if (!Array.isArray(tools)) return undefined;
  const i = tools.findIndex((tool) => tool.input_schema && tool.input_schema.type === undefined);
  if (i !== -1) return { status: 400, message: `tools.${i}.custom.input_schema.type: Field required` };
  const strict = tools.findIndex((tool) => tool.strict === true && openObjectOf(tool.input_schema));
  return strict === -1
    ? undefined
    : {
        status: 400,
        message: `tools.${strict}.custom.input_schema: For 'object' type, 'additionalProperties' must be explicitly set to false`,
      };
}

/** Anthropic wants a user turn's tool_result blocks before any other block of it. */
function toolResultsAfterOtherContent(
  messages: Array<{ role?: unknown; content?: unknown }>,
): ScriptedHttpError | undefined {
  for (const [i, message] of messages.entries()) {
    if (message.role !== 'user' || !Array.isArray(message.content)) continue;
    const types = message.content.map((block: { type?: unknown }) => block.type);
    const firstOther = types.findIndex((type) => type !== 'tool_result');
    if (firstOther >= 0 && types.lastIndexOf('tool_result') > firstOther)
      return {
        status: 400,
        message: `messages.${i}: tool_result blocks must come first in the content of a user message, before any other block`,
      };
  }
  return undefined;
}

function errorBody(error: ScriptedHttpError) {
  const type = error.type ?? ERROR_TYPES[error.status] ?? 'api_error';
  return { type: 'error', error: { type, message: error.message ?? type }, request_id: randomId('req_') };
}

// biome-ignore lint/suspicious/noExplicitAny: the request as the gateway sent it
function defaultReply(body: any): AnthropicReply {
  const messages: Array<{ role: string; content: unknown }> = body.messages;
  const lastUser = messages.filter((message) => message.role === 'user').at(-1);
  const echo = echoReply(textOf(lastUser?.content), body.max_tokens);
  return {
    ...(['enabled', 'adaptive'].includes(body.thinking?.type) && { thinking: 'Thinking it over.' }),
    text: echo.pieces,
    stop: echo.truncated ? 'max_tokens' : 'end_turn',
  };
}

// biome-ignore lint/suspicious/noExplicitAny: the request as the gateway sent it
function messageOf(body: any, reply: AnthropicReply, cached: { read: number; write: number; total: number }) {
  const content: Block[] = [];
  if (reply.thinking)
    content.push({ type: 'thinking', thinking: reply.thinking, signature: randomId('sig_') });
  const text = piecesOf(reply.text).join('');
  if (text !== '') content.push({ type: 'text', text });
  for (const call of reply.toolCalls ?? [])
    content.push({
      type: 'tool_use',
      id: call.id ?? randomId('toolu_'),
      name: call.name,
      input: call.arguments,
    });
  const generated = tokenCount(text) + tokenCount(reply.thinking ?? '') + (reply.toolCalls?.length ?? 0) * 8;
  return {
    id: randomId('msg_'),
    type: 'message',
    role: 'assistant',
    model: body.model,
    content,
    stop_reason: reply.stop ?? ((reply.toolCalls?.length ?? 0) > 0 ? 'tool_use' : 'end_turn'),
    stop_sequence: reply.stopSequence ?? null,
    usage: {
      // Anthropic's buckets are disjoint: input_tokens are those neither read from nor written to the cache.
      input_tokens: reply.usage?.input_tokens ?? Math.max(1, cached.total - cached.read - cached.write),
      cache_creation_input_tokens: reply.usage?.cache_creation_input_tokens ?? cached.write,
      cache_read_input_tokens: reply.usage?.cache_read_input_tokens ?? cached.read,
      output_tokens: reply.usage?.output_tokens ?? Math.max(1, generated),
      service_tier: 'standard',
    },
  };
}

function frame(event: string, data: unknown, marks: Omit<Frame, 'text'> = {}): Frame {
  return { text: `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`, ...marks };
}

/** The event sequence of the real API: blocks in order, ping after the first block opens. */
function streamFrames(message: ReturnType<typeof messageOf>, textPieces: string[]): Frame[] {
  const { content, usage, stop_reason, stop_sequence, ...head } = message;
  const frames = [
    frame('message_start', {
      type: 'message_start',
      message: {
        ...head,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { ...usage, output_tokens: 1 },
      },
    }),
  ];
  content.forEach((block, index) => {
    const delta = (value: Record<string, unknown>) =>
      frame('content_block_delta', { type: 'content_block_delta', index, delta: value }, { paced: true });
    const start = (contentBlock: Record<string, unknown>) => {
      frames.push(
        frame('content_block_start', { type: 'content_block_start', index, content_block: contentBlock }),
      );
      if (index === 0) frames.push(frame('ping', { type: 'ping' }));
    };
    if (block.type === 'thinking') {
      start({ type: 'thinking', thinking: '' });
      frames.push(
        delta({ type: 'thinking_delta', thinking: block.thinking }),
        delta({ type: 'signature_delta', signature: block.signature }),
      );
    } else if (block.type === 'text') {
      start({ type: 'text', text: '' });
      for (const piece of textPieces)
        if (piece !== '') frames.push(delta({ type: 'text_delta', text: piece }));
    } else {
      const json = JSON.stringify(block.input);
      const half = Math.ceil(json.length / 2);
      start({ type: 'tool_use', id: block.id, name: block.name, input: {} });
      frames.push(
        delta({ type: 'input_json_delta', partial_json: json.slice(0, half) }),
        delta({ type: 'input_json_delta', partial_json: json.slice(half) }),
      );
    }
    frames.push(frame('content_block_stop', { type: 'content_block_stop', index }));
  });
  const { service_tier: _tier, ...counts } = usage;
  frames.push(
    frame(
      'message_delta',
      { type: 'message_delta', delta: { stop_reason, stop_sequence }, usage: counts },
      { finalUsage: true },
    ),
    frame('message_stop', { type: 'message_stop' }),
  );
  return frames;
}

/** The text of Anthropic content (a string or blocks), tool inputs and results included. */
function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((block) => {
      if (block.type === 'text') return block.text;
      if (block.type === 'tool_use') return JSON.stringify(block.input);
      if (block.type === 'tool_result') return textOf(block.content);
      return '';
    })
    .join(' ');
}
