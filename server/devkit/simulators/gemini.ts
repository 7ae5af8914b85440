/**
 * A simulator of the Gemini API's streamGenerateContent with `alt=sse`, the gateway's only use:
 * whole GenerateContentResponse objects as SSE data, each with the usageMetadata counted so far
 * (cumulative, as the real API sends it), Google error bodies.
 */

import {
  echoReply,
  type Frame,
  type LoggedRequest,
  pdfPages,
  piecesOf,
  randomId,
  replyToSend,
  type ScriptedHttpError,
  type ScriptedReply,
  type ScriptStep,
  type Simulator,
  type SimulatorOptions,
  sendFrames,
  startSimulator,
  tokenCount,
} from './simulator-server.js';

/** Gemini's FinishReason enum (google.ai.generativelanguage v1beta). */
export type GeminiFinishReason =
  | 'FINISH_REASON_UNSPECIFIED'
  | 'STOP'
  | 'MAX_TOKENS'
  | 'SAFETY'
  | 'RECITATION'
  | 'LANGUAGE'
  | 'OTHER'
  | 'BLOCKLIST'
  | 'PROHIBITED_CONTENT'
  | 'SPII'
  | 'MALFORMED_FUNCTION_CALL'
  | 'IMAGE_SAFETY'
  | 'IMAGE_PROHIBITED_CONTENT'
  | 'IMAGE_OTHER'
  | 'NO_IMAGE'
  | 'IMAGE_RECITATION'
  | 'UNEXPECTED_TOOL_CALL'
  | 'TOO_MANY_TOOL_CALLS';

/** Why Gemini refused a prompt (`promptFeedback.blockReason`). */
export type GeminiBlockReason = 'SAFETY' | 'OTHER' | 'BLOCKLIST' | 'PROHIBITED_CONTENT' | 'IMAGE_SAFETY';

export interface GeminiWireUsage {
  promptTokenCount?: number;
  candidatesTokenCount?: number;
  cachedContentTokenCount?: number;
  thoughtsTokenCount?: number;
  toolUsePromptTokenCount?: number;
}

export type GeminiReply = ScriptedReply<GeminiFinishReason, GeminiWireUsage> & {
  /** The prompt is refused: one chunk without candidates, the reason in `promptFeedback`. */
  blockReason?: GeminiBlockReason;
};
export type GeminiStep = ScriptStep<GeminiReply>;

const STATUS_NAMES: Record<number, string> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  429: 'RESOURCE_EXHAUSTED',
  500: 'INTERNAL',
  503: 'UNAVAILABLE',
  504: 'DEADLINE_EXCEEDED',
};

const ENDPOINT = /^\/v1beta\/models\/([^/:]+):streamGenerateContent$/;

type Part =
  | { text: string; thought?: true }
  | { functionCall: { name: string; args: Record<string, unknown>; id?: string }; thoughtSignature?: string };

/** Models that sign their function calls and require the signatures back (Gemini 3). */
const SIGNING_MODEL = /^gemini-3/;
/** Models that take a JSON response type beside function calling (Gemini 3; 2.5 refuses it). */
const JSON_WITH_FUNCTIONS_MODEL = /^gemini-3/;
/** What Google documents as accepted in place of a signature, for histories Gemini did not write. */
const SIGNATURE_PLACEHOLDERS = new Set([
  'skip_thought_signature_validator',
  'context_engineering_is_the_way_to_go',
]);

export function startGeminiSimulator(options: SimulatorOptions = {}): Promise<Simulator<GeminiStep>> {
  const signatures = new Set<string>();
  return startSimulator<GeminiStep>(async (exchange, next) => {
    const url = new URL(exchange.request.path, 'http://simulator');
    const endpoint = ENDPOINT.exec(url.pathname);
    const [, model = ''] = endpoint ?? [];
    const modelName = decodeURIComponent(model);
    const refusal =
      refusalOf(exchange.request, endpoint !== null, url) ??
      responseTypeRefusal(exchange.request.body, modelName) ??
      (SIGNING_MODEL.test(modelName) ? unsignedCallOf(exchange.request.body, signatures) : undefined);
    const body = exchange.request.body;
    // Gemini says how long to wait in its error body, not in a header.
    const step = await replyToSend(exchange, refusal, next, () => defaultReply(body), { body: errorBody });
    if (!step) return;
    // Always served as with `alt=sse` (the JSON-array form is not simulated).
    const error = errorBody({ status: 500, message: 'An internal error has occurred. Please retry.' });
    if (step.blockReason) {
      const blocked = { text: sseFrame(blockedPrompt(body, step.blockReason, modelName)), finalUsage: true };
      return sendFrames(exchange, [blocked], step, sseFrame(error));
    }
    const chunks = responseChunks(body, step, modelName);
    if (SIGNING_MODEL.test(modelName)) signFirstCall(chunks, signatures);
    const frames = chunks.map(
      (chunk, i): Frame => ({
        text: sseFrame(chunk),
        paced: chunk.candidates[0]?.content !== undefined,
        finalUsage: i === chunks.length - 1,
      }),
    );
    await sendFrames(exchange, frames, step, sseFrame(error));
  }, options);
}

function sseFrame(data: unknown): string {
  return `data: ${JSON.stringify(data)}\r\n\r\n`;
}

function refusalOf(request: LoggedRequest, known: boolean, url: URL): ScriptedHttpError | undefined {
  if (request.method !== 'POST' || !known)
    return { status: 404, message: `The requested URL ${url.pathname} was not found on this server.` };
  if (!request.headers['x-goog-api-key'] && !url.searchParams.get('key'))
    return {
      status: 403,
      message:
        "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.",
    };
  const body = request.body;
  if (typeof body !== 'object' || body === null)
    return { status: 400, message: 'Invalid JSON payload received.' };
  if (!Array.isArray(body.contents) || body.contents.length === 0)
    return { status: 400, message: '* GenerateContentRequest.contents: contents is not specified' };
  return int32OutOfRange(body.generationConfig) ?? penaltyOf(body.generationConfig, url);
}

/** Gemini 2.5 and later refuse any penalty but 0. */
function penaltyOf(config: Record<string, unknown> | undefined, url: URL): ScriptedHttpError | undefined {
  const penalized = ['presencePenalty', 'frequencyPenalty'].some((field) => (config?.[field] ?? 0) !== 0);
  const model = ENDPOINT.exec(url.pathname)?.[1] ?? '';
  return penalized
    ? { status: 400, message: `Penalty is not enabled for models/${decodeURIComponent(model)}` }
    : undefined;
}

/** Gemini's `seed` and `topK` are int32: its JSON parser refuses a value out of range. */
function int32OutOfRange(config: Record<string, unknown> | undefined): ScriptedHttpError | undefined {
  for (const [field, name] of Object.entries({ seed: 'seed', topK: 'top_k' })) {
    const value = config?.[field];
    if (typeof value === 'number' && (value < -(2 ** 31) || value > 2 ** 31 - 1))
      return { status: 400, message: `Invalid value at 'generation_config.${name}' (TYPE_INT32), ${value}` };
  }
  return undefined;
}

/**
 * JSON responses: a response schema (`responseJsonSchema`, or the older OpenAPI-subset
 * `responseSchema`, not both) needs `responseMimeType: application/json` (these two messages are
 * the simulator's words); and models before Gemini 3 refuse that response type beside function
 * declarations (that message is Gemini 2.5's own).
 */
// biome-ignore lint/suspicious/noExplicitAny: the request as the gateway sent it
function responseTypeRefusal(body: any, model: string): ScriptedHttpError | undefined {
  const config = body.generationConfig ?? {};
  if (config.responseJsonSchema !== undefined && config.responseSchema !== undefined)
    return {
      status: 400,
      message: 'responseJsonSchema and responseSchema cannot both be set: response_schema must be omitted',
    };
  const hasSchema = config.responseJsonSchema !== undefined || config.responseSchema !== undefined;
  if (hasSchema && config.responseMimeType !== 'application/json')
    return {
      status: 400,
      message: 'a response schema requires responseMimeType to be set to application/json',
    };
  const declaresFunctions = (body.tools ?? []).some(
    (tool: { functionDeclarations?: unknown[] }) => (tool.functionDeclarations ?? []).length > 0,
  );
  if (
    declaresFunctions &&
    config.responseMimeType === 'application/json' &&
    !JSON_WITH_FUNCTIONS_MODEL.test(model)
  )
    return {
      status: 400,
      message: "Function calling with a response mime type: 'application/json' is unsupported",
    };
  return undefined;
}

/**
 * Gemini 3's check of the current turn (everything after the last user text): in each model step,
 * the first function call carries a signature the API issued, or one of the documented placeholders.
 */
// biome-ignore lint/suspicious/noExplicitAny: the request as the gateway sent it
function unsignedCallOf(body: any, issued: Set<string>): ScriptedHttpError | undefined {
  const contents: Array<{ role?: string; parts?: Part[] }> = body.contents;
  const turnStart = contents.findLastIndex(
    (content) => content.role === 'user' && (content.parts ?? []).some((part) => 'text' in part),
  );
  for (let i = turnStart + 1; i < contents.length; i++) {
    const content = contents[i];
    if (content?.role !== 'model') continue;
    const first = content.parts?.find((part) => 'functionCall' in part);
    if (!first || !('functionCall' in first)) continue;
    const signature = first.thoughtSignature;
    if (signature === undefined)
      return {
        status: 400,
        message: `Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call \`default_api:${first.functionCall.name}\` , position ${i + 1}. please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.`,
      };
    if (!issued.has(signature) && !SIGNATURE_PLACEHOLDERS.has(signature))
      return { status: 400, message: 'Corrupted thought signature.' };
  }
  return undefined;
}

/** Gemini 3 signs the first function call of each answer with an opaque signature. */
function signFirstCall(chunks: ReturnType<typeof responseChunks>, issued: Set<string>): void {
  for (const chunk of chunks)
    for (const part of chunk.candidates[0]?.content?.parts ?? [])
      if ('functionCall' in part) {
        const signature = Buffer.from(`signature:${randomId('')}`).toString('base64');
        issued.add(signature);
        part.thoughtSignature = signature;
        return;
      }
}

/**
 * A Google API error (google.rpc.Status as JSON); a quota error names the quota it hit, and the
 * delay to wait goes in a RetryInfo detail, as Gemini sends them.
 */
function errorBody(error: ScriptedHttpError) {
  const status = error.type ?? STATUS_NAMES[error.status] ?? 'UNKNOWN';
  const details = [
    ...(error.status === 429
      ? [
          {
            '@type': 'type.googleapis.com/google.rpc.QuotaFailure',
            violations: [
              {
                quotaMetric: 'generativelanguage.googleapis.com/generate_content_paid_tier_input_token_count',
                quotaId: 'GenerateContentPaidTierInputTokensPerModelPerMinute',
              },
            ],
          },
        ]
      : []),
    ...(error.retryAfterSeconds !== undefined
      ? [{ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: `${error.retryAfterSeconds}s` }]
      : []),
  ];
  return {
    error: {
      code: error.status,
      message: error.message ?? status,
      status,
      ...(details.length > 0 && { details }),
    },
  };
}

// biome-ignore lint/suspicious/noExplicitAny: the request as the gateway sent it
function defaultReply(body: any): GeminiReply {
  const contents: Array<{ role: string; parts: unknown[] }> = body.contents;
  const lastUser = contents.filter((content) => content.role === 'user').at(-1);
  const echo = echoReply(textOf(lastUser?.parts), body.generationConfig?.maxOutputTokens);
  return { text: echo.pieces, stop: echo.truncated ? 'MAX_TOKENS' : 'STOP' };
}

/** A refused prompt: no candidates, the reason in `promptFeedback`, the prompt counted. */
// biome-ignore lint/suspicious/noExplicitAny: the request as the gateway sent it
function blockedPrompt(body: any, blockReason: GeminiBlockReason, model: string) {
  const promptTokenCount = promptTokens(body);
  return {
    promptFeedback: {
      blockReason,
      safetyRatings: [{ category: 'HARM_CATEGORY_DANGEROUS_CONTENT', probability: 'HIGH', blocked: true }],
    },
    usageMetadata: usageMetadata({ promptTokenCount }),
    modelVersion: model,
    responseId: randomId(''),
  };
}

/**
 * The tokens of a prompt: its words, and its inline media as Gemini bills them (258 tokens an image
 * or PDF page, 32 a second of audio: WAV taken as 16 kHz 16-bit mono, MP3 as 128 kbps).
 */
// biome-ignore lint/suspicious/noExplicitAny: the request as the gateway sent it
function promptTokens(body: any): number {
  let tokens = tokenCount(promptText(body));
  for (const content of body.contents ?? [])
    for (const part of content.parts ?? []) {
      const inline = part.inlineData as { mimeType: string; data: string } | undefined;
      if (!inline) continue;
      const bytes = Buffer.from(inline.data, 'base64');
      if (inline.mimeType === 'application/pdf') tokens += pdfPages(inline.data) * 258;
      else if (inline.mimeType.startsWith('text/')) tokens += tokenCount(bytes.toString('utf8'));
      else if (inline.mimeType === 'audio/wav') tokens += Math.ceil(bytes.length / 32_000) * 32;
      else if (inline.mimeType === 'audio/mp3') tokens += Math.ceil(bytes.length / 16_000) * 32;
      else tokens += 258;
    }
  return Math.max(1, tokens);
}

// biome-ignore lint/suspicious/noExplicitAny: the request as the gateway sent it
function promptText(body: any): string {
  return [
    textOf(body.systemInstruction?.parts),
    ...body.contents.map((c: { parts: unknown }) => textOf(c.parts)),
  ].join(' ');
}

/**
 * The answer as the streamed chunks the real API sends: thoughts, then text piece by piece, then
 * the function calls; the last chunk carries the finishReason and the final usage.
 */
// biome-ignore lint/suspicious/noExplicitAny: the request as the gateway sent it
function responseChunks(body: any, reply: GeminiReply, model: string) {
  const groups: Part[][] = [];
  if (reply.thinking) groups.push([{ text: reply.thinking, thought: true }]);
  for (const piece of piecesOf(reply.text)) groups.push([{ text: piece }]);
  const calls = (reply.toolCalls ?? []).map((call) => ({
    functionCall: { name: call.name, args: call.arguments, ...(call.id && { id: call.id }) },
  }));
  if (calls.length > 0) groups.push(calls);
  if (groups.length === 0) groups.push([]);

  const prompt = reply.usage?.promptTokenCount ?? promptTokens(body);
  const text = piecesOf(reply.text).join('');
  // Known from the first chunk on: the prompt's counts, and the thoughts, which come first.
  const counted: GeminiWireUsage = {
    promptTokenCount: prompt,
    cachedContentTokenCount: reply.usage?.cachedContentTokenCount,
    toolUsePromptTokenCount: reply.usage?.toolUsePromptTokenCount,
    thoughtsTokenCount: reply.usage?.thoughtsTokenCount ?? tokenCount(reply.thinking ?? ''),
  };
  const finalUsage = usageMetadata({
    ...counted,
    candidatesTokenCount: reply.usage?.candidatesTokenCount ?? tokenCount(text) + calls.length * 8,
  });
  const responseId = randomId('');
  let candidatesSoFar = 0;
  return groups.map((parts, i) => {
    const last = i === groups.length - 1;
    for (const part of parts) if ('text' in part && !part.thought) candidatesSoFar += tokenCount(part.text);
    return {
      candidates: [
        {
          ...(parts.length > 0 && { content: { parts, role: 'model' } }),
          ...(last && { finishReason: reply.stop ?? 'STOP' }),
          index: 0,
        },
      ],
      usageMetadata: last ? finalUsage : usageMetadata({ ...counted, candidatesTokenCount: candidatesSoFar }),
      modelVersion: model,
      responseId,
    };
  });
}

function usageMetadata(usage: GeminiWireUsage) {
  const counts = Object.fromEntries(
    Object.entries(usage).filter(([, value]) => value !== undefined && value !== 0),
  );
  const total =
    (usage.promptTokenCount ?? 0) +
    (usage.candidatesTokenCount ?? 0) +
    (usage.thoughtsTokenCount ?? 0) +
    (usage.toolUsePromptTokenCount ?? 0);
  return {
    ...counts,
    promptTokenCount: usage.promptTokenCount ?? 0,
    totalTokenCount: total,
    promptTokensDetails: [{ modality: 'TEXT', tokenCount: usage.promptTokenCount ?? 0 }],
  };
}

/** The text of Gemini parts: text, function call arguments and function responses. */
function textOf(parts: unknown): string {
  if (!Array.isArray(parts)) return '';
  return parts
    .map((part) => {
      if (typeof part.text === 'string') return part.text;
      if (part.functionCall) return JSON.stringify(part.functionCall.args ?? {});
      if (part.functionResponse) return JSON.stringify(part.functionResponse.response ?? {});
      return '';
    })
    .join(' ');
}
