import type { CatalogModel } from '../catalog/catalog.js';
import { type ErrorCode, GatewayError } from '../errors.js';
import type { ChatCompletionUsage } from '../providers/openai-types.js';
import {
  ProviderError,
  type ProviderFailureKind,
  UntranslatableRequestError,
  UpstreamCutError,
} from '../providers/types.js';

/**
 * A failure the provider reported, as OpenAI would answer it (the `openai` clients pick their error
 * class by status): its refusal of the request a 400 (`BadRequestError`, context overflow named as
 * OpenAI names it), its rate limit a 429 and its overload a 503, both retried by the clients after
 * the `Retry-After` the provider gave.
 */
const BY_KIND: Record<ProviderFailureKind, ErrorCode> = {
  invalid_request: 'provider_invalid_request',
  context_length_exceeded: 'context_length_exceeded',
  rate_limited: 'provider_rate_limited',
  overloaded: 'provider_overloaded',
};

/** What an overloaded provider's callers wait when it does not say (Anthropic's 529 seldom does). */
const OVERLOAD_RETRY_AFTER_SECONDS = 2;

/**
 * Upstream statuses no kind explains (the operator's key refused, its quota spent, a model the
 * provider does not know): the same request would fail again. 408 and 409 say "later".
 */
const retriesUseless = (status: number | undefined) =>
  status !== undefined && status >= 400 && status < 500 && status !== 408 && status !== 409;

/**
 * Provider failures as the client sees them, with the provider's own words: by the failure's kind,
 * else a 502 (504 for timeouts) `provider_error`. OpenAI's clients retry every 5xx twice unless told
 * `x-should-retry: false`: they are, when the provider refused for a reason retrying does not cure.
 * `billed`: what was billed of the call (a reset or timeout the provider charges for).
 */
export function providerFailure(
  error: unknown,
  model: CatalogModel,
  billed?: ChatCompletionUsage,
): GatewayError | undefined {
  if (error instanceof UntranslatableRequestError)
    return new GatewayError('validation_error', `${error.field} ${error.message}`, { field: error.field });
  // Cut by the gateway's own shutdown, not failed by the provider: another instance may answer.
  if (error instanceof UpstreamCutError)
    return new GatewayError('service_unavailable', error.message, {
      headers: { 'retry-after': '1' },
      ...(billed && { details: { billed } }),
    });
  if (!(error instanceof ProviderError)) return undefined;
  const status = error.upstreamStatus;
  const { kind, retryAfterSeconds } = error.options;
  const code: ErrorCode = kind ? BY_KIND[kind] : 'provider_error';
  const retryAfter =
    kind === 'overloaded'
      ? (retryAfterSeconds ?? OVERLOAD_RETRY_AFTER_SECONDS)
      : kind === 'rate_limited'
        ? retryAfterSeconds
        : undefined;
  const headers: Record<string, string> = {
    ...(retryAfter !== undefined && { 'retry-after': String(retryAfter) }),
    ...(!kind && retriesUseless(status) && { 'x-should-retry': 'false' }),
  };
  return new GatewayError(
    code,
    `${model.provider} ${status === undefined ? 'failed' : `answered ${status}`}: ${error.message}`,
    {
      details: {
        upstreamStatus: status ?? null,
        upstreamMessage: error.message,
        ...(retryAfter !== undefined && { retryAfterSeconds: retryAfter }),
        ...(billed && { billed }),
      },
      ...(Object.keys(headers).length > 0 && { headers }),
      ...(!kind && error.options.timeout && { timedOut: true }),
    },
  );
}
