/**
 * A simulator of the Gemini API (generateContent, streamGenerateContent with `alt=sse`): whole
 * GenerateContentResponse objects as SSE data, cumulative usageMetadata, Google error bodies.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import {
  echoReply,
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

export type GeminiFinishReason =
  | 'STOP'
  | 'MAX_TOKENS'
  | 'SAFETY'
  | 'RECITATION'
  | 'LANGUAGE'
  | 'OTHER'
  | 'BLOCKLIST'
  | 'PROHIBITED_CONTENT'
  | 'SPII'
  | 'MALFORMED_FUNCTION_CALL';

export interface GeminiWireUsage {
  promptTokenCount?: number;
  candidatesTokenCount?: number;
  cachedContentTokenCount?: number;
  thoughtsTokenCount?: number;
  toolUsePromptTokenCount?: number;
}

export type GeminiReply = ScriptedReply<GeminiFinishReason, GeminiWireUsage>;
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

const ENDPOINT = /^\/v1beta\/models\/([^/:]+):(generateContent|streamGenerateContent)$/;

type Part =
  | { text: string; thought?: true }
  | { functionCall: { name: string; args: Record<string, unknown>; id?: string } };

export function startGeminiSimulator(options: SimulatorOptions = {}): Promise<Simulator<GeminiStep>> {
  return startSimulator<GeminiStep>(async (exchange, next) => {
    const url = new URL(exchange.request.path, 'http://simulator');
    const endpoint = ENDPOINT.exec(url.pathname);
    const refusal = refusalOf(exchange.request, endpoint !== null, url);
    if (refusal) return exchange.json(refusal.status, errorBody(refusal));
    const [, model = '', method] = endpoint ?? [];
    const body = exchange.request.body;
    const step = next() ?? defaultReply(body);
    if ('hang' in step) return exchange.hang();
    if ('httpError' in step) return exchange.json(step.httpError.status, errorBody(step.httpError));
    const chunks = responseChunks(body, step, decodeURIComponent(model));
    if (method === 'generateContent') {
      if (step.delayMs) await sleep(step.delayMs);
      return exchange.json(200, merged(chunks));
    }
    // Streams are always served as with `alt=sse`, the gateway's only use (the JSON-array form is not simulated).
    const error = errorBody({ status: 500, message: 'An internal error has occurred. Please retry.' });
    await sendFrames(exchange, chunks.map(sseFrame), step, sseFrame(error));
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
  return undefined;
}

function errorBody(error: ScriptedHttpError) {
  const status = error.type ?? STATUS_NAMES[error.status] ?? 'UNKNOWN';
  return { error: { code: error.status, message: error.message ?? status, status } };
}

// biome-ignore lint/suspicious/noExplicitAny: the request as the gateway sent it
function defaultReply(body: any): GeminiReply {
  const contents: Array<{ role: string; parts: unknown[] }> = body.contents;
  const lastUser = contents.filter((content) => content.role === 'user').at(-1);
  const echo = echoReply(textOf(lastUser?.parts), body.generationConfig?.maxOutputTokens);
  return { text: echo.pieces, stop: echo.truncated ? 'MAX_TOKENS' : 'STOP' };
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

  const prompt = [
    textOf(body.systemInstruction?.parts),
    ...body.contents.map((c: { parts: unknown }) => textOf(c.parts)),
  ];
  const promptTokens =
    reply.usage?.promptTokenCount ??
    Math.max(
      1,
      prompt.reduce((sum, t) => sum + tokenCount(t), 0),
    );
  const text = piecesOf(reply.text).join('');
  const finalUsage = usageMetadata({
    promptTokenCount: promptTokens,
    candidatesTokenCount: reply.usage?.candidatesTokenCount ?? tokenCount(text) + calls.length * 8,
    thoughtsTokenCount: reply.usage?.thoughtsTokenCount ?? tokenCount(reply.thinking ?? ''),
    cachedContentTokenCount: reply.usage?.cachedContentTokenCount,
    toolUsePromptTokenCount: reply.usage?.toolUsePromptTokenCount,
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
      usageMetadata: last
        ? finalUsage
        : usageMetadata({ promptTokenCount: promptTokens, candidatesTokenCount: candidatesSoFar }),
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

/** A whole (non-streamed) answer: the chunks' parts joined, the last chunk's finish and usage. */
function merged(chunks: ReturnType<typeof responseChunks>) {
  const last = chunks.at(-1)!;
  const parts = chunks.flatMap((chunk) => chunk.candidates[0]?.content?.parts ?? []);
  const texts: Part[] = [];
  for (const part of parts) {
    const previous = texts.at(-1);
    if ('text' in part && previous && 'text' in previous && previous.thought === part.thought)
      previous.text += part.text;
    else texts.push({ ...part });
  }
  const candidate = last.candidates[0];
  return {
    ...last,
    candidates: [{ ...candidate, ...(texts.length > 0 && { content: { parts: texts, role: 'model' } }) }],
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
