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

export interface GatewayErrorOptions {
  field?: string;
  details?: Record<string, unknown>;
  headers?: Record<string, string>;
  /** Protocol fields sent beside the envelope's data/error/meta (x402's `x402Version`, `accepts`, `resource`). */
  envelopeFields?: Record<string, unknown>;
  /** The provider did not answer in time (a `provider_error` a client may tell from a refusal). */
  timedOut?: boolean;
}

/** An error a client is meant to see: stable code, message, and the field at fault; the edge picks the status. */
export class GatewayError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly options: GatewayErrorOptions = {},
  ) {
    super(message);
    this.name = 'GatewayError';
  }
}

export const validationError = (field: string, message: string) =>
  new GatewayError('validation_error', message.startsWith(field) ? message : `${field} ${message}`, {
    field,
  });
