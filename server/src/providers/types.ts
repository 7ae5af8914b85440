import type { CatalogModel } from '../catalog/catalog.js';
import type {
  ChatRequest,
  ChoiceLogprobs,
  FinishReason,
  FunctionCall,
  ReasoningDetail,
  ToolCall,
  ToolCallDelta,
} from './openai-types.js';

/**
 * Tokens a request consumed, in disjoint buckets so that cost is a plain sum of bucket x price.
 * OpenAI's `prompt_tokens` = input + cacheRead + cacheWrite; `completion_tokens` = output + reasoning.
 */
export interface TokenUsage {
  /** Prompt tokens neither read from nor written to a cache. */
  inputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  /** Completion tokens other than reasoning. */
  outputTokens: number;
  /** Reasoning / thinking tokens the provider reports separately (0 where it does not). */
  reasoningTokens: number;
}

/** Usage as metered: `exact` is false when a request failed before the provider's final count. */
export interface MeteredUsage extends TokenUsage {
  exact: boolean;
}

/** One call to an upstream, already resolved to a catalog model. */
export interface ProviderCall {
  model: CatalogModel;
  request: ChatRequest;
  requestId: string;
}

/** A provider's answer in gateway terms; the chat service adds id, created, model and cost. */
export interface ProviderCompletion {
  content: string | null;
  /** The model's refusal to answer (OpenAI's Structured Outputs), which a client tells from an empty answer. */
  refusal?: string;
  toolCalls: ToolCall[];
  /** The call, in the legacy shape, of an answer to a `functions` request (then `toolCalls` is empty). */
  functionCall?: FunctionCall;
  /** The model's reasoning where the provider gives it (Claude's thinking), not part of the content. */
  reasoning?: string;
  reasoningDetails?: ReasoningDetail[];
  finishReason: FinishReason;
  usage: MeteredUsage;
  /** Given by the providers that can, when asked for. */
  logprobs?: ChoiceLogprobs;
}

/** Pieces of a streamed answer, in order; `finish` comes once, after the last delta. */
export type StreamPart =
  | {
      type: 'delta';
      content?: string;
      refusal?: string;
      toolCalls?: ToolCallDelta[];
      /** A piece of the call of an answer to a `functions` request. */
      functionCall?: Partial<FunctionCall>;
      reasoning?: string;
      reasoningDetails?: ReasoningDetail[];
      /** Those of this delta's tokens. */
      logprobs?: ChoiceLogprobs;
    }
  | { type: 'finish'; finishReason: FinishReason };

/**
 * A streamed answer, in batches: the parts of the events one read of the upstream's body completed,
 * in order (so that the events a read brings are relayed together, not one async step each).
 */
export interface ProviderStream extends AsyncIterable<StreamPart[]> {
  /** Usage known so far; exact once the provider has reported its final count. */
  usage(): MeteredUsage;
}

/** What admission decided of a call, sent upstream in the provider's own fields. */
export interface UpstreamLimits {
  /** The output token limit (thinking included where the provider counts it as output). */
  outputTokens: number;
}

/**
 * A provider's API in two steps: translating a call (which throws UntranslatableRequestError for one
 * the provider cannot express, and sends nothing), then sending it with the limits admission
 * decided. The chat service translates before it admits the payer, so a request the provider
 * cannot take is refused before any payment work. Every call is read from the provider as a
 * stream, a whole answer too, so that what the provider counted is known however the call ends.
 */
export interface ProviderAdapter {
  /** The sender resolves with the whole answer, gathered from the stream. */
  prepareCompletion(call: ProviderCall): (limits: UpstreamLimits) => Promise<ProviderCompletion>;
  /** The sender resolves once the upstream accepted the request (so errors before streaming are plain errors). */
  prepareStream(call: ProviderCall): (limits: UpstreamLimits) => Promise<ProviderStream>;
}

/** What a failure the provider reported means for the request's sender. */
export type ProviderFailureKind =
  /** The provider refuses the request itself: sent again, it fails again. */
  | 'invalid_request'
  /** Its prompt, with its output limit, does not fit the model's context window. */
  | 'context_length_exceeded'
  /** The operator's account is over the provider's rate limit: later it may pass. */
  | 'rate_limited'
  /** The provider is short of capacity for everyone: later it may pass. */
  | 'overloaded';

/**
 * An upstream failure: an HTTP error by its `kind` (a 502 or, for `timeout`, 504 when it has none),
 * or, once a stream has opened (at its first part, or a second after its headers), an SSE error event.
 */
export class ProviderError extends Error {
  constructor(
    message: string,
    readonly upstreamStatus: number | undefined,
    readonly options: {
      timeout?: boolean;
      /** Reported by the provider itself (an error status or event), which charges nothing for it. */
      reported?: boolean;
      /** What the provider's report means, where it says (none: a failure on its side, or the operator's). */
      kind?: ProviderFailureKind;
      /** How long the provider asked callers to wait before they retry, in whole seconds. */
      retryAfterSeconds?: number;
      /**
       * What the provider counted (and charges) of a whole answer the gateway cannot pass on: one it
       * ended as a failure (exact), or one whose stream broke off (inexact).
       */
      usage?: MeteredUsage;
      cause?: unknown;
    } = {},
  ) {
    super(message, { cause: options.cause });
    this.name = 'ProviderError';
  }
}

/** A provider call the gateway cut short because it is shutting down (SHUTDOWN_TIMEOUT_MS passed). */
export class UpstreamCutError extends ProviderError {
  constructor(message: string) {
    super(message, undefined);
    this.name = 'UpstreamCutError';
  }
}

/** A request the provider's API cannot express (the client's fault: a 400 naming the field). */
export class UntranslatableRequestError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
    this.name = 'UntranslatableRequestError';
  }
}
