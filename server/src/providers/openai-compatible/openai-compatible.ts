/**
 * Any OpenAI-compatible upstream (OpenAI, OpenRouter, vLLM, Ollama...): the request passes through
 * with the model renamed to the provider's id, and `developer` messages sent as `system` (what
 * OpenAI takes as the same, and servers that predate the role understand); streams ask for usage
 * in their last chunk. A refusal (Structured Outputs) and log probabilities come back as the
 * upstream gave them. The
 * upstream's base URL is the one OpenAI SDKs take (`https://api.openai.com/v1`,
 * `https://openrouter.ai/api/v1`): the path `/chat/completions` is appended to it.
 */
import type { CatalogModel, TokenLimitField } from '../../catalog/catalog.js';
import type {
  ChatMessage,
  ChatRequest,
  ChoiceLogprobs,
  ContentPart,
  FinishReason,
  ToolCallDelta,
} from '../openai-types.js';
import type { ProviderFamily, StreamDecoder } from '../provider-family.js';
import { reportedFailure } from '../reported-failure.js';
import type { EventSourceMessage } from '../sse.js';
import { type MeteredUsage, ProviderError, type StreamPart, type UpstreamLimits } from '../types.js';
import { GeneratedText, zeroUsage } from '../usage.js';

export interface OpenAIWireUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  total_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number; cache_write_tokens?: number } | null;
  completion_tokens_details?: { reasoning_tokens?: number } | null;
}

interface WireChunk {
  choices?: Array<{
    delta?: { content?: string | null; refusal?: string | null; tool_calls?: ToolCallDelta[] | null };
    finish_reason?: string | null;
    logprobs?: ChoiceLogprobs | null;
  }>;
  usage?: OpenAIWireUsage | null;
  error?: { message?: string; code?: unknown };
}

export function openAICompatibleFamily(
  apiKey: string | undefined,
  tokenLimitField?: TokenLimitField,
): ProviderFamily {
  const auth: Record<string, string> = apiKey ? { authorization: `Bearer ${apiKey}` } : {};
  return {
    request: ({ request, model }) => {
      const body = upstreamRequestBody(request, model, tokenLimitField);
      return (limits) => ({ path: '/chat/completions', headers: auth, body: body(limits) });
    },
    streamDecoder: () => new OpenAIStreamDecoder(),
    logprobs: true,
  };
}

/**
 * The output limit is the one admission decided (the client's, or what the payer can pay for): what
 * a payer can owe unsettled is bounded by what its requests in flight can cost. An upstream naming
 * its `tokenLimitField` gets it in that field whichever of the two the client used; otherwise in
 * the client's own field, and as `max_tokens` when it set none. Always streamed, with usage.
 */
export function upstreamRequestBody(
  request: ChatRequest,
  model: Pick<CatalogModel, 'providerModel'>,
  tokenLimitField?: TokenLimitField,
): (limits: UpstreamLimits) => ChatRequest {
  const field =
    tokenLimitField ?? (request.max_completion_tokens == null ? 'max_tokens' : 'max_completion_tokens');
  const body = {
    ...knownFields(request),
    messages: request.messages.map(knownMessageFields),
    model: model.providerModel,
    stream: true,
    stream_options: { include_usage: true },
  };
  return ({ outputTokens }) => ({ ...body, [field]: outputTokens });
}

/**
 * Only the fields the gateway knows go upstream (the schema lets others through): one it does not
 * know may change what the provider charges (`service_tier`, `web_search_options`, audio
 * `modalities`, a router's fallback `models`, a part's `cache_control`) while the payer is billed
 * the catalog's price for the tokens. Those it forwards change only which tokens are generated,
 * all counted in the usage (a lower `reasoning_effort` saves the payer reasoning tokens), or what
 * the answer tells of them (`logprobs`).
 */
const FORWARDED_FIELDS = [
  'temperature',
  'top_p',
  'top_k',
  'frequency_penalty',
  'presence_penalty',
  'stop',
  'response_format',
  'tools',
  'tool_choice',
  'parallel_tool_calls',
  'n',
  'seed',
  'user',
  'reasoning_effort',
  'verbosity',
  'logit_bias',
  'logprobs',
  'top_logprobs',
  'prompt_cache_key',
  'safety_identifier',
] as const satisfies ReadonlyArray<keyof ChatRequest>;

function knownFields(request: ChatRequest): Partial<ChatRequest> {
  const known: Partial<Record<keyof ChatRequest, unknown>> = {};
  // A null is no value: a strict upstream may refuse one.
  for (const field of FORWARDED_FIELDS) if (request[field] != null) known[field] = request[field];
  if (request.tools)
    known.tools = request.tools.map(({ type, function: { name, description, parameters, strict } }) => ({
      type,
      function: { name, description, parameters, strict },
    }));
  return known as Partial<ChatRequest>;
}

/** `developer` goes out as `system`, which every OpenAI-compatible server knows. */
function knownMessageFields(message: ChatMessage): ChatMessage {
  const { role, content, name, tool_calls, tool_call_id } = message;
  return {
    role: role === 'developer' ? 'system' : role,
    ...(content !== undefined && {
      content: Array.isArray(content) ? content.map(knownPartFields) : content,
    }),
    ...(name !== undefined && { name }),
    ...(tool_calls !== undefined && {
      tool_calls: tool_calls.map(({ id, type, function: fn, extra_content }) => ({
        id,
        type,
        function: { name: fn.name, arguments: fn.arguments },
        ...(extra_content !== undefined && { extra_content }),
      })),
    }),
    ...(tool_call_id !== undefined && { tool_call_id }),
  };
}

function knownPartFields(part: ContentPart): ContentPart {
  if (part.type === 'text') return { type: 'text', text: part.text };
  if (part.type === 'file') {
    const { file_data, filename } = part.file;
    return { type: 'file', file: { file_data, ...(filename !== undefined && { filename }) } };
  }
  if (part.type === 'input_audio') {
    const { data, format } = part.input_audio;
    return { type: 'input_audio', input_audio: { data, format } };
  }
  const { url, detail } = part.image_url;
  return { type: 'image_url', image_url: { url, ...(detail !== undefined && { detail }) } };
}

function openAIFinishReason(reason: string | null | undefined): FinishReason {
  if (reason === 'length' || reason === 'content_filter' || reason === 'tool_calls') return reason;
  return reason === 'function_call' ? 'tool_calls' : 'stop';
}

/**
 * OpenAI counts cached tokens inside `prompt_tokens` and reasoning inside `completion_tokens`. Some
 * upstreams (xAI) count reasoning beside `completion_tokens`, inside `total_tokens` only: reasoning
 * is taken as beside the completion when the total says so, or when it is larger than the
 * completion (and cached tokens larger than the prompt as beside the prompt), so that no bucket is
 * charged twice nor goes negative.
 */
export function openAIUsage(usage: OpenAIWireUsage | null | undefined): MeteredUsage {
  if (!usage) return zeroUsage(false);
  const prompt = usage.prompt_tokens ?? 0;
  const completion = usage.completion_tokens ?? 0;
  const cacheRead = usage.prompt_tokens_details?.cached_tokens ?? 0;
  const cacheWrite = usage.prompt_tokens_details?.cache_write_tokens ?? 0;
  const reasoning = usage.completion_tokens_details?.reasoning_tokens ?? 0;
  const reasoningBeside =
    reasoning > completion || (reasoning > 0 && usage.total_tokens === prompt + completion + reasoning);
  const cachedBeside = cacheRead + cacheWrite > prompt;
  return {
    inputTokens: cachedBeside ? prompt : prompt - cacheRead - cacheWrite,
    cacheReadTokens: cacheRead,
    cacheWriteTokens: cacheWrite,
    outputTokens: reasoningBeside ? completion : completion - reasoning,
    reasoningTokens: reasoning,
    exact: true,
  };
}

/**
 * Usage is exact only if the upstream honoured `include_usage` and the stream reached `[DONE]`; it
 * comes in the last chunk, so until then the output is estimated from the text.
 */
class OpenAIStreamDecoder implements StreamDecoder {
  private metered = zeroUsage();
  private readonly generated = new GeneratedText();
  private reported = false;
  private finishReason: FinishReason | undefined;
  private done = false;

  usage(): MeteredUsage {
    return this.reported ? { ...this.metered } : this.generated.billedIn(this.metered);
  }

  decode(event: EventSourceMessage): StreamPart[] {
    if (event.data.trim() === '[DONE]') {
      this.done = true;
      return [];
    }
    const chunk = JSON.parse(event.data) as WireChunk;
    if (chunk.error) throw reportedFailure(undefined, chunk);
    if (chunk.usage) {
      this.metered = { ...openAIUsage(chunk.usage), exact: false };
      this.reported = true;
    }
    const parts: StreamPart[] = [];
    const choice = chunk.choices?.[0];
    const { content, refusal, tool_calls: toolCalls } = choice?.delta ?? {};
    const logprobs = tokenLogprobs(choice?.logprobs);
    for (const text of [content, refusal, ...(toolCalls ?? []).map((call) => call.function?.arguments)])
      if (text) this.generated.add(text);
    if (content || refusal || toolCalls?.length || logprobs)
      parts.push({
        type: 'delta',
        ...(content && { content }),
        ...(refusal && { refusal }),
        ...(toolCalls?.length && { toolCalls }),
        ...(logprobs && { logprobs }),
      });
    if (choice?.finish_reason && this.finishReason === undefined)
      this.finishReason = openAIFinishReason(choice.finish_reason);
    return parts;
  }

  end(): StreamPart[] {
    if (!this.done) throw new ProviderError('the answer stream ended before [DONE]', undefined);
    this.metered.exact = this.reported;
    return [{ type: 'finish', finishReason: this.finishReason ?? 'stop' }];
  }
}

/** A chunk's log probabilities if they are of some tokens: a role chunk's empty lists make no delta. */
function tokenLogprobs(logprobs: ChoiceLogprobs | null | undefined): ChoiceLogprobs | undefined {
  return logprobs?.content?.length || logprobs?.refusal?.length ? logprobs : undefined;
}
