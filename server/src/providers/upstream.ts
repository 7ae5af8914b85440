import { errors, Pool } from 'undici';
import { reportedFailure } from './reported-failure.js';
import { ProviderError, UpstreamCutError } from './types.js';

export interface UpstreamTimeouts {
  /** TCP + TLS connect. */
  connectMs: number;
  /** Until the response headers, and the longest pause between two body chunks. */
  responseMs: number;
  /**
   * The longest a whole answer (one its client waits for as one JSON body) may take, stream and
   * all: minutes for a long one (the providers' own clients wait 10).
   */
  completionMs: number;
}

export interface UpstreamRequest {
  /** Path below the base URL, with its query string. */
  path: string;
  headers: Record<string, string>;
  body: unknown;
  /** The stream of a whole answer, read to its end within `completionMs`. */
  whole?: boolean;
}

/** A body being received; iterate it for chunks. Errors while reading are raw undici errors. */
export type UpstreamBody = AsyncIterable<Uint8Array>;

/** One provider origin behind a keep-alive pool. */
export interface Upstream {
  /** Sends a JSON POST; resolves with the body of a 2xx answer, throws ProviderError otherwise. */
  post(request: UpstreamRequest): Promise<UpstreamBody>;
  /** Names a transport failure (timeout, refused connection) as a ProviderError. */
  failure(error: unknown): ProviderError;
  /** Waits for the calls under way, then closes the pool. */
  close(): Promise<void>;
  /**
   * Ends the calls under way at once: each fails (a body being read too) with an UpstreamCutError
   * giving `reason`, as do later ones. Resolves with how many were under way.
   */
  cut(reason: string): Promise<number>;
}

export function createUpstream(name: string, baseUrl: string, timeouts: UpstreamTimeouts): Upstream {
  const url = new URL(baseUrl);
  const basePath = url.pathname.replace(/\/+$/, '');
  const pool = new Pool(url.origin, {
    connect: { timeout: timeouts.connectMs },
    headersTimeout: timeouts.responseMs,
    bodyTimeout: timeouts.responseMs,
  });
  const failure = (error: unknown) => upstreamFailure(name, error, timeouts);
  let cutWith: UpstreamCutError | undefined;
  return {
    async post(request) {
      if (cutWith) throw cutWith;
      let response: Awaited<ReturnType<Pool['request']>>;
      try {
        response = await pool.request({
          method: 'POST',
          path: basePath + request.path,
          headers: { 'content-type': 'application/json', accept: '*/*', ...request.headers },
          body: JSON.stringify(request.body),
          ...(request.whole && { signal: AbortSignal.timeout(timeouts.completionMs) }),
        });
      } catch (error) {
        throw failure(error);
      }
      if (response.statusCode < 300) return response.body;
      let text = '';
      try {
        text = await response.body.text();
      } catch (error) {
        throw failure(error);
      }
      throw reportedFailure(response.statusCode, parsedBody(text), response.headers);
    },
    failure,
    // A pool already cut has nothing left to wait for.
    close: async () => {
      if (!pool.destroyed) await pool.close();
    },
    async cut(reason) {
      cutWith = new UpstreamCutError(`the call to ${name} was cut: ${reason}`);
      const calls = pool.stats.size;
      await pool.destroy(cutWith);
      return calls;
    },
  };
}

function upstreamFailure(name: string, error: unknown, timeouts: UpstreamTimeouts): ProviderError {
  if (error instanceof ProviderError) return error;
  // AbortSignal.timeout's reason, which undici throws as is.
  if (error instanceof DOMException && error.name === 'TimeoutError')
    return new ProviderError(
      `${name} did not finish its answer within ${timeouts.completionMs} ms`,
      undefined,
      {
        timeout: true,
        cause: error,
      },
    );
  if (error instanceof errors.ConnectTimeoutError)
    return new ProviderError(`${name} could not be reached within ${timeouts.connectMs} ms`, undefined, {
      timeout: true,
      cause: error,
    });
  if (error instanceof errors.HeadersTimeoutError || error instanceof errors.BodyTimeoutError)
    return new ProviderError(`${name} sent nothing for ${timeouts.responseMs} ms`, undefined, {
      timeout: true,
      cause: error,
    });
  const reason = error instanceof Error ? error.message : String(error);
  return new ProviderError(`${name} could not be reached: ${reason}`, undefined, { cause: error });
}

/** The provider's own words from an error body (its JSON `error.message`, or its text). */
export function errorMessage(text: string, status: number): string {
  return reportedFailure(status, parsedBody(text)).message;
}

/** An error body as JSON when it is JSON, else as its text. */
function parsedBody(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
