/**
 * Gemini API (generateContent / streamGenerateContent with SSE) behind the OpenAI chat shape.
 *
 * - Gemini function calls carry no id (or one only some endpoints fill): the gateway hands out
 *   `call_...` ids and, when the client sends results back, finds each call's function name
 *   through the id in the earlier assistant message.
 * - Tool parameters go out as `parametersJsonSchema`, which takes JSON Schema as OpenAI clients
 *   write it (the older `parameters` accepts only an OpenAPI subset); likewise the schema of a
 *   `json_schema` response format goes out as `responseJsonSchema`, not `responseSchema`.
 * - JSON mode and `json_schema` formats are `responseMimeType: application/json` (with the schema),
 *   except beside tools: Gemini 2.5 refuses its JSON response type with function calling ("Function
 *   calling with a response mime type: 'application/json' is unsupported"), so they are then a
 *   system instruction, the schema written into it.
 * - `maxOutputTokens` is the limit admission decided, whatever the client asked for.
 * - Image URLs go as `fileData` (Gemini fetches them), declared with the media type their extension
 *   implies; data URLs go as `inlineData`. Either in the types Gemini takes (PNG, JPEG, WebP, HEIC,
 *   HEIF): another (a `.gif` URL too) is a 400 naming the part.
 * - A `file` part (`file_data`, a data URL: PDF, plain text, HTML, CSV, Markdown, XML) and
 *   `input_audio` (WAV, MP3) go as `inlineData` of their type; another file type is a 400 naming it.
 * - `reasoning_effort` is a `thinkingBudget`, as Google's OpenAI-compatible endpoint maps it for
 *   Gemini 2.5 (ignored, Gemini would think as much as it likes, billed to the payer). `none` turns
 *   thinking off: a 400 naming the field for models that cannot (2.5 Pro, Gemini 3), as is `xhigh`,
 *   which Google maps to no budget.
 * - Thought parts (`thought: true`) are not part of the OpenAI answer; their tokens are reasoning tokens.
 * - An answer ending with MALFORMED_FUNCTION_CALL (or UNEXPECTED_TOOL_CALL, TOO_MANY_TOOL_CALLS) is a
 *   provider error, billed as counted: OpenAI has no finish reason for it, and `stop` would pass for done.
 *   Any other reason but STOP and MAX_TOKENS (a filter, OTHER, a blocked prompt) is `content_filter`.
 * - `seed` and `top_k` are 32-bit integers for Gemini (OpenAI's `seed` is 64-bit): one out of that
 *   range is a 400 naming the field before any payment, not a 502 once Gemini refuses it.
 * - Penalties are dropped without error: Gemini 2.5 and later refuse any but 0 ("Penalty is not
 *   enabled for models/gemini-2.5-flash"); only 2.0 models took them.
 * - Empty texts are left out (Gemini refuses empty text parts and empty turns), and messages left
 *   empty with them; a conversation with no turn left is a 400 before any payment.
 * - `parallel_tool_calls: false` has no Gemini setting: the answer keeps only its first function call
 *   (the others' tokens are still billed, as Gemini generated them).
 * - A function call's thought signature (Gemini 3 refuses a conversation whose current turn lacks
 *   them) travels as Google's OpenAI-compatible endpoint carries it: the tool call's
 *   `extra_content.google.thought_signature`, out in the answer and back in the assistant message.
 */
import type { CatalogModel } from '../../catalog/catalog.js';
import {
  fileSource,
  type ImageTypes,
  imageSource,
  isInstruction,
  JSON_MODE_INSTRUCTION,
  laterInstruction,
  mediaTypeOfUrl,
  newToolCallId,
  noTurnsError,
  textOf,
  textParts,
  toolArguments,
} from '../message-parts.js';
import { nestingExceeds } from '../nesting.js';
import type { ChatMessage, ChatRequest, FinishReason, ToolCall, ToolChoice } from '../openai-types.js';
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

const IMAGE_TYPES: ImageTypes = {
  provider: 'Gemini',
  mediaTypes: ['image/png', 'image/jpeg', 'image/webp', 'image/heic', 'image/heif'],
};

/** The document types Gemini reads inline (PDF with its pages' text and images; text files as text). */
const DOCUMENT_TYPES: ImageTypes = {
  provider: 'Gemini',
  mediaTypes: ['application/pdf', 'text/plain', 'text/html', 'text/csv', 'text/markdown', 'text/xml'],
};

/** OpenAI's `input_audio` formats as Gemini's audio types. */
const AUDIO_TYPES = { wav: 'audio/wav', mp3: 'audio/mp3' } as const;

/** Thinking budgets of the OpenAI efforts, as Google's OpenAI-compatible endpoint sets them. */
const THINKING_BUDGETS: Record<string, number> = {
  none: 0,
  minimal: 1024,
  low: 1024,
  medium: 8192,
  high: 24576,
};

/** Models that can turn thinking off (budget 0): Gemini 2.5 Flash and Flash-Lite, not 2.5 Pro nor Gemini 3. */
const THINKING_OPTIONAL = /^gemini-2\.5-flash/;

type GeminiPart =
  | { text: string; thought?: boolean }
  | { inlineData: { mimeType: string; data: string } }
  | { fileData: { fileUri: string; mimeType: string } }
  | { functionCall: { name: string; args: Record<string, unknown>; id?: string }; thoughtSignature?: string }
  | { functionResponse: { name: string; response: Record<string, unknown> } };

type FunctionCallPart = Extract<GeminiPart, { functionCall: unknown }>;

export interface GeminiContent {
  role: 'user' | 'model';
  parts: GeminiPart[];
}

export interface GeminiUsageMetadata {
  promptTokenCount?: number;
  candidatesTokenCount?: number;
  cachedContentTokenCount?: number;
  thoughtsTokenCount?: number;
  toolUsePromptTokenCount?: number;
  totalTokenCount?: number;
}

interface GeminiResponse {
  candidates?: Array<{ content?: { parts?: GeminiPart[] }; finishReason?: string }>;
  promptFeedback?: { blockReason?: string };
  usageMetadata?: GeminiUsageMetadata;
  error?: { code?: number; message?: string; status?: string };
}

export function geminiFamily(apiKey: string | undefined): ProviderFamily {
  const auth: Record<string, string> = apiKey ? { 'x-goog-api-key': apiKey } : {};
  return {
    request: (call) => {
      const body = geminiRequestBody(call.request, call.model);
      return (limits) => ({
        path: `/v1beta/models/${encodeURIComponent(call.model.providerModel)}:streamGenerateContent?alt=sse`,
        headers: auth,
        body: body(limits),
      });
    },
    streamDecoder: (call) => new GeminiStreamDecoder(oneCallOnly(call.request)),
  };
}

/** OpenAI's `parallel_tool_calls: false`: at most one tool call a turn, which agent frameworks rely on. */
function oneCallOnly(request: ChatRequest): boolean {
  return request.parallel_tool_calls === false;
}

/** The request translated (or refused), waiting for the limits admission decides. */
export function geminiRequestBody(
  request: ChatRequest,
  model: CatalogModel,
): (limits: UpstreamLimits) => ProviderRequest['body'] {
  const { systemInstruction, contents } = geminiContents(request.messages);
  const stop = [request.stop ?? []].flat().filter((sequence) => sequence !== '');
  const tools = request.tools ?? [];
  const format = request.response_format;
  const jsonMode = format?.type === 'json_object' || format?.type === 'json_schema';
  const schema = format?.type === 'json_schema' ? format.json_schema.schema : undefined;
  // Gemini 2.5 refuses a JSON response type beside function calling: JSON mode is then an instruction.
  if (jsonMode && tools.length > 0) systemInstruction.parts.push({ text: jsonModeInstruction(schema) });
  const budget =
    request.reasoning_effort != null ? thinkingBudget(request.reasoning_effort, model) : undefined;
  const generationConfig = {
    ...(request.temperature != null && { temperature: request.temperature }),
    ...(request.top_p != null && { topP: request.top_p }),
    ...(request.top_k != null && { topK: int32(request.top_k, 'top_k') }),
    ...(stop.length > 0 && { stopSequences: stop }),
    ...(jsonMode &&
      tools.length === 0 && {
        responseMimeType: 'application/json',
        ...(schema !== undefined && { responseJsonSchema: schema }),
      }),
    ...(request.seed != null && { seed: int32(request.seed, 'seed') }),
  };
  const body = {
    contents,
    ...(systemInstruction.parts.length > 0 && { systemInstruction }),
    ...(tools.length > 0 && {
      tools: [
        {
          functionDeclarations: tools.map(({ function: fn }) => ({
            name: fn.name,
            ...(fn.description !== undefined && { description: fn.description }),
            ...(fn.parameters !== undefined && { parametersJsonSchema: fn.parameters }),
          })),
        },
      ],
      toolConfig: { functionCallingConfig: geminiFunctionCalling(request.tool_choice ?? 'auto') },
    }),
  };
  return ({ outputTokens }) => ({
    ...body,
    generationConfig: {
      maxOutputTokens: outputTokens,
      ...generationConfig,
      // Thoughts count against maxOutputTokens: thinking gets at most half of it, the answer the rest.
      ...(budget !== undefined && {
        thinkingConfig: { thinkingBudget: Math.min(budget, Math.floor(outputTokens / 2)) },
      }),
    },
  });
}

/** JSON mode said in words, for requests where Gemini cannot be given a JSON response type. */
function jsonModeInstruction(schema: Record<string, unknown> | undefined): string {
  if (schema === undefined) return JSON_MODE_INSTRUCTION;
  return `${JSON_MODE_INSTRUCTION} The object must be valid against this JSON Schema: ${JSON.stringify(schema)}`;
}

/** `value` if Gemini takes it as an int32. */
function int32(value: number, field: string): number {
  if (value < -(2 ** 31) || value > 2 ** 31 - 1)
    throw new UntranslatableRequestError(
      field,
      'must be between -2147483648 and 2147483647 for Gemini models',
    );
  return value;
}

function thinkingBudget(effort: string, model: CatalogModel): number {
  const budget = THINKING_BUDGETS[effort];
  if (budget === undefined)
    throw new UntranslatableRequestError(
      'reasoning_effort',
      'must be none, minimal, low, medium or high for Gemini models',
    );
  if (budget === 0 && !THINKING_OPTIONAL.test(model.providerModel))
    throw new UntranslatableRequestError(
      'reasoning_effort',
      `cannot be none for ${model.id}: the model cannot turn thinking off`,
    );
  return budget;
}

function geminiFunctionCalling(choice: ToolChoice): Record<string, unknown> {
  if (choice === 'none') return { mode: 'NONE' };
  if (choice === 'auto') return { mode: 'AUTO' };
  if (choice === 'required') return { mode: 'ANY' };
  return { mode: 'ANY', allowedFunctionNames: [choice.function.name] };
}

/**
 * System (and developer) messages before the first turn become `systemInstruction` (a part per text
 * part); a later one keeps its place as user text tagged as system instructions. Assistant turns
 * are `model` turns; tool results are `functionResponse` parts of a user turn, named after the call
 * their id points to (a result of several text parts joined by blank lines). Consecutive turns of one role are merged, which also groups parallel tool results.
 */
export function geminiContents(messages: ChatMessage[]): {
  systemInstruction: { parts: Array<{ text: string }> };
  contents: GeminiContent[];
} {
  const system: Array<{ text: string }> = [];
  const contents: GeminiContent[] = [];
  const functionNames = new Map<string, string>();
  messages.forEach((message, i) => {
    const at = `messages[${i}]`;
    if (isInstruction(message) && contents.length === 0) {
      system.push(...textParts(message.content).map((text) => ({ text })));
      return;
    }
    let parts: GeminiPart[];
    if (isInstruction(message)) {
      parts = textParts(message.content).map((text) => ({ text: laterInstruction(text) }));
    } else if (message.role === 'tool') {
      const name = functionNames.get(message.tool_call_id ?? '');
      if (name === undefined)
        throw new UntranslatableRequestError(
          `${at}.tool_call_id`,
          'must be the id of a tool call in an earlier assistant message',
        );
      parts = [{ functionResponse: { name, response: functionResponse(textOf(message.content)) } }];
    } else {
      parts = contentParts(message, at);
      message.tool_calls?.forEach((call, j) => {
        functionNames.set(call.id, call.function.name);
        const signature = call.extra_content?.google?.thought_signature;
        parts.push({
          functionCall: {
            name: call.function.name,
            args: toolArguments(call.function.arguments, `${at}.tool_calls[${j}].function.arguments`),
          },
          ...(signature !== undefined && { thoughtSignature: signature }),
        });
      });
    }
    if (parts.length === 0) return;
    const role = message.role === 'assistant' ? 'model' : 'user';
    const last = contents.at(-1);
    if (last?.role === role) last.parts.push(...parts);
    else contents.push({ role, parts });
  });
  if (contents.length === 0) throw noTurnsError();
  return { systemInstruction: { parts: system }, contents };
}

function contentParts(message: ChatMessage, at: string): GeminiPart[] {
  const { content } = message;
  if (content == null) return [];
  if (typeof content === 'string') return content !== '' ? [{ text: content }] : [];
  return content.flatMap((part, j): GeminiPart[] => {
    if (part.type === 'text') return part.text !== '' ? [{ text: part.text }] : [];
    if (part.type === 'input_audio')
      return [
        { inlineData: { mimeType: AUDIO_TYPES[part.input_audio.format], data: part.input_audio.data } },
      ];
    if (part.type === 'file') {
      const { mediaType, data } = fileSource(part, `${at}.content[${j}].file`, DOCUMENT_TYPES);
      return [{ inlineData: { mimeType: mediaType, data } }];
    }
    const field = `${at}.content[${j}].image_url.url`;
    const source = imageSource(part.image_url.url, field, IMAGE_TYPES);
    if (source.kind === 'inline') return [{ inlineData: { mimeType: source.mediaType, data: source.data } }];
    return [{ fileData: { fileUri: source.url, mimeType: mediaTypeOfUrl(source.url, field, IMAGE_TYPES) } }];
  });
}

/**
 * Gemini wants a JSON object: a tool's JSON object answer as is, anything else under `output` (as
 * text when it is not JSON, or nests too deep to forward).
 */
function functionResponse(text: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text);
    if (nestingExceeds(value)) return { output: text };
    if (typeof value === 'object' && value !== null && !Array.isArray(value))
      return value as Record<string, unknown>;
    return { output: value };
  } catch {
    return { output: text };
  }
}

function toolCallOf({ functionCall: call, thoughtSignature }: FunctionCallPart): ToolCall {
  return {
    id: call.id || newToolCallId(),
    type: 'function',
    function: { name: call.name, arguments: JSON.stringify(call.args ?? {}) },
    ...(thoughtSignature !== undefined && {
      extra_content: { google: { thought_signature: thoughtSignature } },
    }),
  };
}

/**
 * Finish reasons of an answer whose function calls Gemini could not make (an invalid call, a call
 * with no tools declared, too many): no content, no usable call. Passed on as `stop` it would end
 * an agent's loop as if the model were done; it is a 502 a client retries, billed as Gemini bills it.
 */
const FAILED_CALLS = new Set(['MALFORMED_FUNCTION_CALL', 'UNEXPECTED_TOOL_CALL', 'TOO_MANY_TOOL_CALLS']);

function failedCalls(reason: string, usage: MeteredUsage): ProviderError {
  return new ProviderError(
    `the answer ended with ${reason}: Gemini could not make its function call`,
    undefined,
    { usage },
  );
}

/**
 * STOP and MAX_TOKENS end an answer as the model meant or as its cap cut it. Every other reason
 * (the safety, recitation, blocklist, PII, language and image filters, OTHER, an unspecified one, one
 * added after this was written) is Gemini withholding the rest of the answer: `content_filter`, the
 * only OpenAI reason that does not pass it for finished.
 */
export function geminiFinishReason(reason: string, calledFunctions: boolean): FinishReason {
  if (reason === 'MAX_TOKENS') return 'length';
  if (reason === 'STOP') return calledFunctions ? 'tool_calls' : 'stop';
  return 'content_filter';
}

/**
 * Disjoint buckets: `promptTokenCount` includes the cached tokens; tool-use prompt tokens are
 * input too; thoughts are counted apart from `candidatesTokenCount`.
 */
export function geminiUsage(usage: GeminiUsageMetadata | undefined, exact: boolean): MeteredUsage {
  const cached = usage?.cachedContentTokenCount ?? 0;
  return {
    inputTokens: (usage?.promptTokenCount ?? 0) - cached + (usage?.toolUsePromptTokenCount ?? 0),
    cacheReadTokens: cached,
    cacheWriteTokens: 0,
    outputTokens: usage?.candidatesTokenCount ?? 0,
    reasoningTokens: usage?.thoughtsTokenCount ?? 0,
    exact,
  };
}

/**
 * Each SSE event is a whole GenerateContentResponse; its `usageMetadata` counts are cumulative, the
 * output's as far as the event goes: until one states it, the output is estimated from the text.
 */
export class GeminiStreamDecoder implements StreamDecoder {
  private metered = zeroUsage();
  private readonly generated = new GeneratedText();
  private outputStated = false;
  private toolCalls = 0;
  private finishReason: string | undefined;

  /** `oneCallOnly`: the function calls after the first are not relayed (`parallel_tool_calls: false`). */
  constructor(private readonly oneCallOnly = false) {}

  usage(): MeteredUsage {
    return this.outputStated || this.metered.exact
      ? { ...this.metered }
      : this.generated.billedIn(this.metered);
  }

  decode(event: EventSourceMessage): StreamPart[] {
    const data = JSON.parse(event.data) as GeminiResponse;
    if (data.error) throw reportedFailure(data.error.code, data);
    if (data.usageMetadata) {
      this.metered = geminiUsage(data.usageMetadata, false);
      if (data.usageMetadata.candidatesTokenCount != null) this.outputStated = true;
    }
    const parts: StreamPart[] = [];
    const candidate = data.candidates?.[0];
    for (const part of candidate?.content?.parts ?? []) {
      if ('text' in part) {
        this.generated.add(part.text);
        if (!part.thought && part.text !== '') parts.push({ type: 'delta', content: part.text });
      } else if ('functionCall' in part) {
        // The calls left out under oneCallOnly were generated (and billed) all the same.
        const call = toolCallOf(part);
        this.generated.add(call.function.arguments);
        if (this.oneCallOnly && this.toolCalls > 0) continue;
        parts.push({ type: 'delta', toolCalls: [{ index: this.toolCalls++, ...call }] });
      }
    }
    // A prompt Gemini refused comes back without candidates, its reason in promptFeedback.
    if (data.promptFeedback?.blockReason && !candidate) this.finishReason = data.promptFeedback.blockReason;
    else if (candidate?.finishReason && this.finishReason === undefined)
      this.finishReason = candidate.finishReason;
    return parts;
  }

  end(): StreamPart[] {
    if (this.finishReason === undefined)
      throw new ProviderError('the answer stream ended before a finishReason', undefined);
    this.metered.exact = true;
    if (FAILED_CALLS.has(this.finishReason)) throw failedCalls(this.finishReason, this.usage());
    return [{ type: 'finish', finishReason: geminiFinishReason(this.finishReason, this.toolCalls > 0) }];
  }
}
