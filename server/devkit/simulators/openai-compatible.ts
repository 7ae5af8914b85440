/**
 * A minimal OpenAI-compatible upstream (POST /v1/chat/completions), as vLLM or OpenRouter answer,
 * streamed (the gateway's only use): usage only in a last chunk without choices, when asked for.
 * Asked for `logprobs`, it gives each piece of the answer as one token, with `top_logprobs`
 * alternatives.
 */
import {
  echoReply,
  type Frame,
  type LoggedRequest,
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

export type OpenAIFinishReason = 'stop' | 'length' | 'tool_calls' | 'content_filter';

export interface OpenAIWireUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  total_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number };
  completion_tokens_details?: { reasoning_tokens?: number };
}

export type OpenAIReply = ScriptedReply<OpenAIFinishReason, OpenAIWireUsage> & {
  /** Answer without any usage (servers that ignore `stream_options.include_usage`). */
  unmetered?: boolean;
  /** A refusal instead of the answer (Structured Outputs), streamed piece by piece as `text` is. */
  refusal?: string | string[];
};
export type OpenAIStep = ScriptStep<OpenAIReply>;

export function startOpenAICompatibleSimulator(
  options: SimulatorOptions = {},
): Promise<Simulator<OpenAIStep>> {
  return startSimulator<OpenAIStep>(async (exchange, next) => {
    const body = exchange.request.body;
    const step = await replyToSend(exchange, refusalOf(exchange.request), next, () => defaultReply(body), {
      body: errorBody,
      headers: retryAfterHeader,
    });
    if (!step) return;
    const answer = answerOf(body, step);
    const error = frame(
      errorBody({ status: 500, message: 'The server had an error while processing your request.' }),
    ).text;
    await sendFrames(
      exchange,
      streamFrames(answer, body.stream_options?.include_usage === true && !step.unmetered),
      step,
      error,
    );
  }, options);
}

/** OpenAI's reasoning models (o1, o3, o4-mini, gpt-5...) refuse `max_tokens`, as OpenAI does. */
const REASONING_MODEL = /^(o\d|gpt-5)/;

function refusalOf(request: LoggedRequest): ScriptedHttpError | undefined {
  if (request.method !== 'POST' || request.path.split('?')[0] !== '/v1/chat/completions')
    return { status: 404, message: `Invalid URL (${request.method} ${request.path})` };
  const body = request.body;
  if (typeof body !== 'object' || body === null || !Array.isArray(body.messages))
    return { status: 400, message: "Missing required parameter: 'messages'." };
  if (body.stream !== true)
    return { status: 400, message: "'stream': this simulator answers streamed requests only." };
  if (body.max_tokens != null && REASONING_MODEL.test(String(body.model)))
    return {
      status: 400,
      message:
        "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
    };
  return undefined;
}

function errorBody(error: ScriptedHttpError) {
  const type = error.type ?? (error.status >= 500 ? 'server_error' : 'invalid_request_error');
  return { error: { message: error.message ?? type, type, param: null, code: error.code ?? null } };
}

// biome-ignore lint/suspicious/noExplicitAny: the request as the gateway sent it
function defaultReply(body: any): OpenAIReply {
  const lastUser = body.messages.filter((message: { role: string }) => message.role === 'user').at(-1);
  const echo = echoReply(textOf(lastUser?.content), body.max_completion_tokens ?? body.max_tokens);
  return { text: echo.pieces, stop: echo.truncated ? 'length' : 'stop' };
}

// biome-ignore lint/suspicious/noExplicitAny: the request as the gateway sent it
function answerOf(body: any, reply: OpenAIReply) {
  const text = piecesOf(reply.text).join('');
  const toolCalls = (reply.toolCalls ?? []).map((call) => ({
    id: call.id ?? randomId('call_'),
    type: 'function' as const,
    function: { name: call.name, arguments: JSON.stringify(call.arguments) },
  }));
  const prompt = body.messages.map((message: { content: unknown }) => textOf(message.content));
  const promptTokens =
    reply.usage?.prompt_tokens ??
    Math.max(
      1,
      prompt.reduce((s: number, t: string) => s + tokenCount(t), 0),
    );
  const completionTokens = reply.usage?.completion_tokens ?? tokenCount(text) + toolCalls.length * 8;
  return {
    id: randomId('chatcmpl-'),
    created: Math.floor(Date.now() / 1000),
    model: body.model,
    pieces: piecesOf(reply.text),
    text,
    refusalPieces: piecesOf(reply.refusal),
    /** How many alternatives each token's log probability comes with, when they were asked for. */
    topLogprobs: body.logprobs === true ? Number(body.top_logprobs ?? 0) : undefined,
    toolCalls,
    finishReason: reply.stop ?? (toolCalls.length > 0 ? 'tool_calls' : 'stop'),
    usage: {
      prompt_tokens: promptTokens,
      completion_tokens: completionTokens,
      // Scripted for upstreams that count reasoning beside the completion (xAI).
      total_tokens: reply.usage?.total_tokens ?? promptTokens + completionTokens,
      prompt_tokens_details: {
        cached_tokens: reply.usage?.prompt_tokens_details?.cached_tokens ?? 0,
        audio_tokens: 0,
      },
      completion_tokens_details: {
        reasoning_tokens: reply.usage?.completion_tokens_details?.reasoning_tokens ?? 0,
        audio_tokens: 0,
      },
    },
  };
}

type Answer = ReturnType<typeof answerOf>;

function frame(data: unknown, marks: Omit<Frame, 'text'> = {}): Frame {
  return { text: `data: ${JSON.stringify(data)}\n\n`, ...marks };
}

function streamFrames(answer: Answer, includeUsage: boolean): Frame[] {
  const head = {
    id: answer.id,
    object: 'chat.completion.chunk',
    created: answer.created,
    model: answer.model,
  };
  const chunk = (delta: unknown, finishReason: string | null = null, logprobs: unknown = null) => ({
    ...head,
    choices: [{ index: 0, delta, logprobs, finish_reason: finishReason }],
    ...(includeUsage && { usage: null }),
  });
  const piece = (delta: unknown, logprobs: unknown = null) =>
    frame(chunk(delta, null, logprobs), { paced: true });
  // As OpenAI: asked for log probabilities, the role chunk has empty lists of them.
  const frames = [
    frame(chunk({ role: 'assistant', content: '', refusal: null }, null, logprobsOf(answer, [], []))),
  ];
  for (const text of answer.pieces)
    if (text !== '') frames.push(piece({ content: text }, logprobsOf(answer, [text], [])));
  for (const text of answer.refusalPieces)
    frames.push(piece({ refusal: text }, logprobsOf(answer, [], [text])));
  answer.toolCalls.forEach((call, index) => {
    frames.push(
      frame(
        chunk({
          tool_calls: [
            { index, id: call.id, type: 'function', function: { name: call.function.name, arguments: '' } },
          ],
        }),
      ),
      piece({ tool_calls: [{ index, function: { arguments: call.function.arguments } }] }),
    );
  });
  frames.push(frame(chunk({}, answer.finishReason)));
  if (includeUsage) frames.push(frame({ ...head, choices: [], usage: answer.usage }, { finalUsage: true }));
  frames.push({ text: 'data: [DONE]\n\n' });
  return frames;
}

/** The log probabilities of `content` and `refusal` pieces (one token each), if they were asked for. */
function logprobsOf(answer: Answer, content: string[], refusal: string[]) {
  const top = answer.topLogprobs;
  if (top === undefined) return null;
  const tokens = (pieces: string[]) =>
    pieces.map((token) => ({
      ...tokenLogprob(token, -0.5),
      top_logprobs: Array.from({ length: top }, (_, k) =>
        k === 0 ? tokenLogprob(token, -0.5) : tokenLogprob(`alt${k}`, -0.5 - k),
      ),
    }));
  return { content: tokens(content), refusal: refusal.length > 0 ? tokens(refusal) : null };
}

function tokenLogprob(token: string, logprob: number) {
  return { token, logprob, bytes: [...Buffer.from(token)] };
}

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((part) => (part.type === 'text' ? part.text : '')).join(' ');
}
