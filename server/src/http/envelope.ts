import { servedPath } from '../served-path.js';

/** The `ApiResponse<T>` envelope every JSON answer wears, except chat completion bodies. */
export interface ApiResponse<T> {
  data: T | null;
  error: ApiErrorBody | null;
  meta: { timestamp: string; path: string };
}

export interface ApiErrorBody {
  code: string;
  message: string;
  /** OpenAI's error class (`invalid_request_error`, ...), which OpenAI's clients read. */
  type: string;
  /** OpenAI's name for `field`: the request field at fault, or null. */
  param: string | null;
  field?: string;
  /** Extra facts a client can act on (upstream status, amount owed, ...). */
  details?: Record<string, unknown>;
}

function meta(url: string) {
  return { timestamp: new Date().toISOString(), path: servedPath(url) };
}

export function success<T>(data: T, url: string): ApiResponse<T> {
  return { data, error: null, meta: meta(url) };
}

export function failure(error: ApiErrorBody, url: string): ApiResponse<never> {
  return { data: null, error, meta: meta(url) };
}
