import type { ApiErrorBody } from './envelope.js';

/** Stable error codes; documented in docs/api.md. */
export type ErrorCode =
  | 'validation_error'
  | 'invalid_json'
  | 'unsupported_media_type'
  | 'payload_too_large'
  | 'request_timeout'
  | 'unauthorized'
  | 'payment_required'
  | 'payment_identifier_used'
  | 'rate_limited'
  | 'too_many_in_flight'
  | 'not_found'
  | 'method_not_allowed'
  | 'unsupported_model'
  | 'provider_error'
  | 'provider_invalid_request'
  | 'context_length_exceeded'
  | 'provider_rate_limited'
  | 'provider_overloaded'
  | 'payments_unavailable'
  | 'service_unavailable'
  | 'internal_error';

/** An error a client is meant to see: status, stable code, message, and the field at fault. */
export class ApiError extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: ErrorCode,
    message: string,
    readonly options: {
      field?: string;
      details?: Record<string, unknown>;
      headers?: Record<string, string>;
      /** Protocol fields sent beside the envelope's data/error/meta (x402's `x402Version`, `accepts`, `resource`). */
      envelopeFields?: Record<string, unknown>;
    } = {},
  ) {
    super(message);
    this.name = 'ApiError';
  }

  toBody(): ApiErrorBody {
    const body: ApiErrorBody = {
      code: this.code,
      message: this.message,
      type: openAiErrorType(this.statusCode),
      param: this.options.field ?? null,
    };
    if (this.options.field !== undefined) body.field = this.options.field;
    if (this.options.details !== undefined) body.details = this.options.details;
    return body;
  }
}

/** The error classes OpenAI's API answers with, by status (its clients read `type` and `param`). */
function openAiErrorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 429) return 'rate_limit_error';
  return status >= 500 ? 'server_error' : 'invalid_request_error';
}

export const validationError = (field: string, message: string) =>
  new ApiError(400, 'validation_error', message.startsWith(field) ? message : `${field} ${message}`, {
    field,
  });
