import { type ErrorCode, GatewayError, type GatewayErrorOptions } from '../errors.js';
import type { ApiErrorBody } from './envelope.js';

export { type ErrorCode, validationError } from '../errors.js';

/** The status each code answers with; `ApiError` names another where http/ needs one (431). */
const STATUS: Record<ErrorCode, number> = {
  validation_error: 400,
  invalid_json: 400,
  unsupported_media_type: 415,
  payload_too_large: 413,
  request_timeout: 408,
  unauthorized: 401,
  payment_required: 402,
  payment_identifier_used: 409,
  rate_limited: 429,
  too_many_in_flight: 429,
  not_found: 404,
  method_not_allowed: 405,
  unsupported_model: 400,
  provider_error: 502,
  provider_invalid_request: 400,
  context_length_exceeded: 400,
  provider_rate_limited: 429,
  provider_overloaded: 503,
  payments_unavailable: 503,
  service_unavailable: 503,
  internal_error: 500,
};

/** The HTTP status a gateway error answers with. */
export function statusOf(error: GatewayError): number {
  if (error instanceof ApiError) return error.statusCode;
  if (error.code === 'provider_error' && error.options.timedOut) return 504;
  return STATUS[error.code];
}

/** The envelope's `error` member for a gateway error. */
export function errorBody(error: GatewayError): ApiErrorBody {
  const body: ApiErrorBody = {
    code: error.code,
    message: error.message,
    type: openAiErrorType(statusOf(error)),
    param: error.options.field ?? null,
  };
  if (error.options.field !== undefined) body.field = error.options.field;
  if (error.options.details !== undefined) body.details = error.options.details;
  return body;
}

/** A gateway error raised by http/ itself, at a status its code alone does not name. */
export class ApiError extends GatewayError {
  constructor(
    readonly statusCode: number,
    code: ErrorCode,
    message: string,
    options: GatewayErrorOptions = {},
  ) {
    super(code, message, options);
    this.name = 'ApiError';
  }

  toBody(): ApiErrorBody {
    return errorBody(this);
  }
}

/** The error classes OpenAI's API answers with, by status (its clients read `type` and `param`). */
function openAiErrorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 429) return 'rate_limit_error';
  return status >= 500 ? 'server_error' : 'invalid_request_error';
}
