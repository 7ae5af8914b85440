/**
 * The OpenAI Chat Completions wire shapes the gateway accepts and returns.
 * Requests are validated against `chat-request-schema.ts` before they reach these types.
 */

/**
 * `developer` is what OpenAI's newer models call the system role; the gateway treats both alike.
 * `function` is the legacy tool result, made a `tool` message before translation.
 */
export type Role = 'system' | 'developer' | 'user' | 'assistant' | 'tool' | 'function';

/**
 * A prompt cache breakpoint as OpenRouter and LiteLLM clients mark one (Anthropic's own shape): the
 * prompt up to and including what carries it is cached.
 */
export interface CacheControl {
  type: 'ephemeral';
  ttl?: '5m' | '1h';
}

export interface TextPart {
  type: 'text';
  text: string;
  cache_control?: CacheControl;
}

export interface ImagePart {
  type: 'image_url';
  image_url: { url: string; detail?: 'auto' | 'low' | 'high' };
  cache_control?: CacheControl;
}

/** A file given inline (`file_data`, a data URL), as the Vercel AI SDK and LangChain send PDFs. */
export interface FilePart {
  type: 'file';
  file: { file_data?: string; file_id?: string; filename?: string };
  cache_control?: CacheControl;
}

export interface AudioPart {
  type: 'input_audio';
  input_audio: { data: string; format: 'wav' | 'mp3' };
  cache_control?: CacheControl;
}

export type ContentPart = TextPart | ImagePart | FilePart | AudioPart;

/**
 * What a provider needs back with a tool call on the next turn, as Google's OpenAI-compatible API
 * names it: Gemini's thought signature of the call.
 */
export interface ToolCallExtraContent {
  google?: { thought_signature?: string };
}

export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
  extra_content?: ToolCallExtraContent;
}

/**
 * A piece of a model's reasoning as OpenRouter returns it (and takes it back on the assistant message
 * of a tool loop): Claude's thinking with its signature, or its redacted thinking.
 */
export type ReasoningDetail =
  | { type: 'reasoning.text'; text?: string; signature?: string; index: number; format?: string }
  | { type: 'reasoning.encrypted'; data: string; index: number; format?: string };

export interface ChatMessage {
  role: Role;
  content?: string | ContentPart[] | null;
  name?: string;
  tool_calls?: ToolCall[];
  tool_call_id?: string;
  /** The legacy single call of an assistant message, made a `tool_calls` entry before translation. */
  function_call?: FunctionCall;
  /** A breakpoint after the message's last part (LiteLLM's convention for string content). */
  cache_control?: CacheControl;
  /** An assistant message's reasoning, given back as the answer carried it. */
  reasoning_details?: ReasoningDetail[];
}

/** A legacy (`functions`) call, as OpenAI still takes and returns it. */
export interface FunctionCall {
  name: string;
  arguments: string;
}

/** A legacy `functions` entry: a function tool without its wrapper. */
export interface LegacyFunction {
  name: string;
  description?: string;
  parameters?: Record<string, unknown>;
}

export interface FunctionTool {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown>; strict?: boolean };
  /** A breakpoint after this tool's definition (LiteLLM's convention). */
  cache_control?: CacheControl;
}

/** OpenAI's Structured Outputs: the answer is JSON that `schema` (a JSON Schema) describes. */
export interface JsonSchemaFormat {
  name: string;
  description?: string;
  schema?: Record<string, unknown>;
  strict?: boolean | null;
}

export type ResponseFormat =
  | { type: 'text' }
  | { type: 'json_object' }
  | { type: 'json_schema'; json_schema: JsonSchemaFormat };

export type ToolChoice = 'none' | 'auto' | 'required' | { type: 'function'; function: { name: string } };

export interface ChatRequest {
  model?: string;
  messages: ChatMessage[];
  stream?: boolean | null;
  stream_options?: { include_usage?: boolean } | null;
  temperature?: number | null;
  top_p?: number | null;
  top_k?: number | null;
  frequency_penalty?: number | null;
  presence_penalty?: number | null;
  max_tokens?: number | null;
  max_completion_tokens?: number | null;
  stop?: string | string[] | null;
  response_format?: ResponseFormat | null;
  tools?: FunctionTool[] | null;
  tool_choice?: ToolChoice | null;
  /** Legacy tools; made `tools` before translation, kept so that the answer comes in their shape. */
  functions?: LegacyFunction[] | null;
  function_call?: 'none' | 'auto' | { name: string } | null;
  parallel_tool_calls?: boolean | null;
  n?: number | null;
  seed?: number | null;
  user?: string | null;
  /** OpenAI's reasoning models: how much they think (`minimal`, `low`, `medium`, `high`). */
  reasoning_effort?: string | null;
  verbosity?: string | null;
  logit_bias?: Record<string, number> | null;
  prompt_cache_key?: string | null;
  safety_identifier?: string | null;
  /** Token log probabilities, which only OpenAI-compatible upstreams give. */
  logprobs?: boolean | null;
  top_logprobs?: number | null;
}

/** `function_call` only in answers to a legacy (`functions`) request. */
export type FinishReason = 'stop' | 'length' | 'tool_calls' | 'content_filter' | 'function_call';

export interface TopLogprob {
  token: string;
  logprob: number;
  bytes: number[] | null;
}

export interface TokenLogprob extends TopLogprob {
  top_logprobs: TopLogprob[];
}

/** A choice's log probabilities, of its content's tokens or of its refusal's. */
export interface ChoiceLogprobs {
  content: TokenLogprob[] | null;
  refusal: TokenLogprob[] | null;
}

export interface ChatCompletionUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details?: { cached_tokens: number; cache_write_tokens?: number };
  completion_tokens_details?: { reasoning_tokens: number };
  cost?: number;
  cost_details?: CostDetails;
}

/** What a request cost, in USD (OpenRouter's `usage.cost`) and exactly beside it. */
export interface UsageCost {
  cost: number;
  cost_details: CostDetails;
}

/** Exact amounts: USD as decimal strings, pico-USD (1e-12 USD) as integer strings. */
export interface CostDetails {
  total_usd: string;
  provider_usd: string;
  commission_usd: string;
  total_pico_usd: string;
  provider_pico_usd: string;
  commission_pico_usd: string;
}

export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: Array<{
    index: number;
    message: {
      role: 'assistant';
      content: string | null;
      tool_calls?: ToolCall[];
      function_call?: FunctionCall;
      refusal: string | null;
      reasoning?: string;
      reasoning_details?: ReasoningDetail[];
    };
    finish_reason: FinishReason;
    logprobs: ChoiceLogprobs | null;
  }>;
  usage: ChatCompletionUsage;
}

export interface ToolCallDelta {
  index: number;
  id?: string;
  type?: 'function';
  function?: { name?: string; arguments?: string };
  extra_content?: ToolCallExtraContent;
}

export interface ChunkDelta {
  role?: 'assistant';
  content?: string;
  refusal?: string;
  tool_calls?: ToolCallDelta[];
  function_call?: Partial<FunctionCall>;
  reasoning?: string;
  reasoning_details?: ReasoningDetail[];
}

export interface ChatCompletionChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  choices: Array<{
    index: number;
    delta: ChunkDelta;
    finish_reason: FinishReason | null;
    logprobs: ChoiceLogprobs | null;
  }>;
  usage?: ChatCompletionUsage | null;
}
