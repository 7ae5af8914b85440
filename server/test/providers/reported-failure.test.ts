import { describe, expect, test } from 'vitest';
import { reportedFailure } from '../../src/providers/reported-failure.js';

/** What the gateway makes of a provider's error: its kind, delay and words. */
const read = (...args: Parameters<typeof reportedFailure>) => {
  const error = reportedFailure(...args);
  return {
    kind: error.options.kind,
    retryAfterSeconds: error.options.retryAfterSeconds,
    message: error.message,
  };
};

describe('a failure the provider reported, read from its body and headers', () => {
  test('Anthropic: a context overflow, a refusal, a rate limit with retry-after, an overload', () => {
    const anthropic = (type: string, message: string) => ({ type: 'error', error: { type, message } });
    expect(
      read(400, anthropic('invalid_request_error', 'prompt is too long: 201000 tokens > 200000 maximum')),
    ).toEqual({
      kind: 'context_length_exceeded',
      retryAfterSeconds: undefined,
      message: 'prompt is too long: 201000 tokens > 200000 maximum',
    });
    expect(read(400, anthropic('invalid_request_error', 'max_tokens: Field required')).kind).toBe(
      'invalid_request',
    );
    expect(read(413, anthropic('request_too_large', 'Request exceeds the maximum size')).kind).toBe(
      'invalid_request',
    );
    expect(read(429, anthropic('rate_limit_error', 'slow down'), { 'retry-after': '12' })).toMatchObject({
      kind: 'rate_limited',
      retryAfterSeconds: 12,
    });
    expect(read(529, anthropic('overloaded_error', 'Overloaded'))).toMatchObject({
      kind: 'overloaded',
      retryAfterSeconds: undefined,
    });
  });

  test('what refuses the operator, not the request, has no kind: a 502 the clients do not retry', () => {
    const spendLimit = {
      type: 'error',
      error: {
        type: 'rate_limit_error',
        message: 'You have reached your specified API usage limits.',
        details: { error_code: 'enforced_spend_limit_reached' },
      },
    };
    expect(read(429, spendLimit).kind).toBeUndefined();
    const credit = {
      type: 'error',
      error: {
        type: 'invalid_request_error',
        message: 'Your credit balance is too low to access the Anthropic API.',
      },
    };
    expect(read(400, credit).kind).toBeUndefined();
    const badKey = {
      error: {
        code: 400,
        message: 'API key not valid. Please pass a valid API key.',
        status: 'INVALID_ARGUMENT',
        details: [
          {
            '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
            reason: 'API_KEY_INVALID',
            domain: 'googleapis.com',
          },
        ],
      },
    };
    expect(read(400, badKey).kind).toBeUndefined();
    expect(
      read(400, {
        error: {
          code: 400,
          message: 'User location is not supported for the API use.',
          status: 'FAILED_PRECONDITION',
        },
      }).kind,
    ).toBeUndefined();
    expect(
      read(429, {
        error: {
          message: 'You exceeded your current quota',
          type: 'insufficient_quota',
          code: 'insufficient_quota',
        },
      }).kind,
    ).toBeUndefined();
    expect(
      read(401, { error: { message: 'Incorrect API key provided', type: 'invalid_request_error' } }).kind,
    ).toBeUndefined();
  });

  test('Gemini: its RetryInfo delay in whole seconds, rounded up, from an object or an array body', () => {
    const quota = (retryDelay: string) => ({
      error: {
        code: 429,
        message: 'Resource has been exhausted (e.g. check quota).',
        status: 'RESOURCE_EXHAUSTED',
        details: [
          { '@type': 'type.googleapis.com/google.rpc.QuotaFailure', violations: [] },
          { '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay },
        ],
      },
    });
    expect(read(429, quota('17s'))).toMatchObject({ kind: 'rate_limited', retryAfterSeconds: 17 });
    expect(read(429, quota('1.200s')).retryAfterSeconds).toBe(2);
    expect(read(429, [quota('3s')])).toMatchObject({
      retryAfterSeconds: 3,
      message: 'Resource has been exhausted (e.g. check quota).',
    });
    const overflow = {
      error: {
        code: 400,
        message: 'The input token count (1200293) exceeds the maximum number of tokens allowed (1048576).',
        status: 'INVALID_ARGUMENT',
      },
    };
    expect(read(400, overflow).kind).toBe('context_length_exceeded');
    expect(
      read(503, { error: { code: 503, message: 'The model is overloaded.', status: 'UNAVAILABLE' } }).kind,
    ).toBe('overloaded');
  });

  test('OpenAI-compatible: context_length_exceeded by its code; retry-after-ms first, then retry-after as seconds or a date', () => {
    const overflow = {
      error: {
        message: 'too long',
        type: 'invalid_request_error',
        param: 'messages',
        code: 'context_length_exceeded',
      },
    };
    expect(read(400, overflow).kind).toBe('context_length_exceeded');
    const limited = {
      error: { message: 'Rate limit reached', type: 'requests', code: 'rate_limit_exceeded' },
    };
    expect(read(429, limited, { 'retry-after-ms': '1500', 'retry-after': '9' }).retryAfterSeconds).toBe(2);
    const inTenSeconds = new Date(Date.now() + 10_000).toUTCString();
    expect(read(429, limited, { 'retry-after': inTenSeconds }).retryAfterSeconds).toBeGreaterThanOrEqual(9);
    expect(read(429, limited, { 'retry-after': inTenSeconds }).retryAfterSeconds).toBeLessThanOrEqual(11);
    expect(read(429, limited, { 'retry-after': 'soon' }).retryAfterSeconds).toBeUndefined();
  });

  test('an error event in a stream without a status has no kind; a body that is not JSON gives its text', () => {
    expect(read(undefined, { error: { message: 'The server had an error' } })).toEqual({
      kind: undefined,
      retryAfterSeconds: undefined,
      message: 'The server had an error',
    });
    expect(read(502, '<html>Bad gateway</html>').message).toBe('<html>Bad gateway</html>');
    expect(read(500, {}).message).toBe('HTTP 500');
    expect(read(undefined, {}).message).toBe('the stream failed');
  });
});
