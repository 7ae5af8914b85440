/**
 * A simulator of the Anthropic Messages API (POST /v1/messages): the real SSE wire format (named
 * events; the input counts and an output of 1 in message_start, the final cumulative counts in
 * message_delta), the real error bodies. The gateway always streams; a whole (JSON) answer, at
 * once and without the scripted faults, is for benchmarks calling it directly.
 */
import {
  echoReply,
  type Frame,
  type LoggedRequest,
  piecesOf,
  randomId,
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
  return startSimulator<AnthropicStep>(async (exchange, next) => {
    const refusal = refusalOf(exchange.request);
    if (refusal) return exchange.json(refusal.status, errorBody(refusal));
    const body = exchange.request.body;
    const step = next() ?? defaultReply(body);
    if ('hang' in step) return exchange.hang();
    if ('httpError' in step) return exchange.json(step.httpError.status, errorBody(step.httpError));
    const message = messageOf(body, step);
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
    toolResultsAfterOtherContent(body.messages) ??
    emptyTextOf(body.messages) ??
    untypedToolOf(body.tools) ??
    outputFormatRefusal(body.output_config)
  );
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
  return { text: echo.pieces, stop: echo.truncated ? 'max_tokens' : 'end_turn' };
}

// biome-ignore lint/suspicious/noExplicitAny: the request as the gateway sent it
function messageOf(body: any, reply: AnthropicReply) {
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
  const prompt = [
    textOf(body.system),
    ...body.messages.map((message: { content: unknown }) => textOf(message.content)),
  ];
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
      input_tokens:
        reply.usage?.input_tokens ??
        Math.max(
          1,
          prompt.reduce((sum, t) => sum + tokenCount(t), 0),
        ),
      cache_creation_input_tokens: reply.usage?.cache_creation_input_tokens ?? 0,
      cache_read_input_tokens: reply.usage?.cache_read_input_tokens ?? 0,
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
