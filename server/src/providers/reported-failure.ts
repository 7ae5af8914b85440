import type { IncomingHttpHeaders } from 'node:http';
import { ProviderError, type ProviderFailureKind } from './types.js';

/**
 * A failure the provider reported (an error status, or an error event in its stream), read from its
 * body: Anthropic (`{type:"error",error:{type,message}}`), Gemini (`{error:{code,message,status,details}}`,
 * or those in an array) and OpenAI-compatible upstreams (`{error:{message,type,code}}`) all carry
 * `error.message`. What it means for the caller (`kind`) comes from the status and, where the status
 * alone cannot tell, the body; how long to wait from `retry-after` (seconds or a date),
 * `retry-after-ms`, or Gemini's `RetryInfo.retryDelay`.
 */
export function reportedFailure(
  status: number | undefined,
  body: unknown,
  headers: IncomingHttpHeaders = {},
): ProviderError {
  const error = errorObject(body);
  const message = providerMessage(body, error, status);
  const kind = status === undefined ? undefined : failureKind(status, error, message);
  const retryAfterSeconds = retryAfterOf(headers) ?? retryDelayOf(error);
  return new ProviderError(message, status, {
    reported: true,
    ...(kind && { kind }),
    ...(retryAfterSeconds !== undefined && { retryAfterSeconds }),
  });
}

const MESSAGE_LIMIT = 1000;

/**
 * Context overflows as each provider words them: Anthropic's "prompt is too long: N tokens > M
 * maximum" and "input length and `max_tokens` exceed context limit", Gemini's "The input token count
 * (N) exceeds the maximum number of tokens allowed (M)", OpenAI's and vLLM's "maximum context length".
 */
const CONTEXT_OVERFLOW =
  /prompt is too long|exceed context limit|input token count.*exceeds the maximum number of tokens|maximum context length/i;

type WireError = Record<string, unknown>;

/**
 * 400s that refuse the operator, not the request: Anthropic's "credit balance is too low", Gemini's
 * invalid or expired key (an ErrorInfo reason `API_KEY_INVALID`, `API_KEY_EXPIRED`), and its
 * FAILED_PRECONDITION (billing not enabled, a region it does not serve).
 */
const OPERATOR_REFUSAL = /credit balance is too low|API key not valid|API key expired/i;

function operatorRefused(error: WireError, message: string): boolean {
  const details = Array.isArray(error.details) ? (error.details as Array<{ reason?: unknown }>) : [];
  return (
    error.status === 'FAILED_PRECONDITION' ||
    OPERATOR_REFUSAL.test(message) ||
    details.some((detail) => typeof detail?.reason === 'string' && detail.reason.startsWith('API_KEY_'))
  );
}

function failureKind(status: number, error: WireError, message: string): ProviderFailureKind | undefined {
  if (status === 400 || status === 413) {
    if (operatorRefused(error, message)) return undefined;
    return error.code === 'context_length_exceeded' || CONTEXT_OVERFLOW.test(message)
      ? 'context_length_exceeded'
      : 'invalid_request';
  }
  if (status === 429) return quotaExhausted(error) ? undefined : 'rate_limited';
  if (status === 503 || status === 529) return 'overloaded';
  return undefined;
}

/**
 * A 429 that waiting does not cure: the operator's OpenAI quota, or the monthly spend limit
 * Anthropic enforces (which comes without `retry-after`).
 */
function quotaExhausted(error: WireError): boolean {
  const details = error.details as { error_code?: unknown } | undefined;
  return (
    error.code === 'insufficient_quota' ||
    error.type === 'insufficient_quota' ||
    details?.error_code === 'enforced_spend_limit_reached'
  );
}

function errorObject(body: unknown): WireError {
  const root = Array.isArray(body) ? body[0] : body;
  if (typeof root !== 'object' || root === null) return {};
  const error = (root as { error?: unknown }).error;
  return typeof error === 'object' && error !== null ? (error as WireError) : {};
}

function providerMessage(body: unknown, error: WireError, status: number | undefined): string {
  let message: unknown = error.message;
  if (message === undefined && typeof body === 'string') message = body.trim();
  if (message === undefined && typeof body === 'object' && body !== null) {
    const root = body as { error?: unknown; message?: unknown };
    message = typeof root.error === 'string' ? root.error : root.message;
  }
  const words =
    typeof message === 'string' && message !== ''
      ? message
      : status === undefined
        ? 'the stream failed'
        : `HTTP ${status}`;
  return words.length > MESSAGE_LIMIT ? `${words.slice(0, MESSAGE_LIMIT)}…` : words;
}

/** `retry-after-ms` (OpenAI's), else `retry-after` in seconds or as an HTTP date; whole seconds, rounded up. */
function retryAfterOf(headers: IncomingHttpHeaders): number | undefined {
  const ms = Number(headers['retry-after-ms']);
  if (headers['retry-after-ms'] !== undefined && Number.isFinite(ms) && ms >= 0) return Math.ceil(ms / 1000);
  const value = headers['retry-after'];
  if (typeof value !== 'string' || value.trim() === '') return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return seconds >= 0 ? Math.ceil(seconds) : undefined;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - Date.now()) / 1000));
}

/** Gemini's `google.rpc.RetryInfo` detail: `retryDelay` is a protobuf Duration ("17s", "0.5s"). */
function retryDelayOf(error: WireError): number | undefined {
  if (!Array.isArray(error.details)) return undefined;
  for (const detail of error.details as Array<Record<string, unknown>>) {
    if (typeof detail?.['@type'] !== 'string' || !detail['@type'].endsWith('google.rpc.RetryInfo')) continue;
    const match = /^(\d+(?:\.\d+)?)s$/.exec(String(detail.retryDelay));
    if (match) return Math.ceil(Number(match[1]));
  }
  return undefined;
}
