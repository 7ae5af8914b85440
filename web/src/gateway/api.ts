/** The gateway's `ApiResponse<T>` envelope. */
interface Envelope<T> {
  data: T | null;
  error: { code: string; message: string; field?: string } | null;
}

/** A failure the dashboard explains to the user: the gateway's own error, or no answer at all. */
export class GatewayError extends Error {
  constructor(
    message: string,
    /** The envelope's stable code; `unreachable` when the gateway did not answer. */
    readonly code: string,
    readonly status?: number,
  ) {
    super(message);
    this.name = 'GatewayError';
  }

  get unreachable(): boolean {
    return this.code === 'unreachable';
  }
}

/** Calls a REST route of the gateway (same origin) and unwraps its envelope. */
export async function callGateway<T>(path: string, init: RequestInit = {}): Promise<T> {
  const response = await send(path, init);
  const body = (await response.json().catch(() => null)) as Envelope<T> | null;
  if (!body || !('data' in body)) throw badAnswer(path, response);
  if (!response.ok || body.error) {
    const error = body.error ?? { code: 'error', message: response.statusText };
    throw new GatewayError(error.message, error.code, response.status);
  }
  return body.data as T;
}

export async function send(path: string, init: RequestInit): Promise<Response> {
  let response: Response;
  try {
    response = await fetch(path, { ...init, headers: { accept: 'application/json', ...init.headers } });
  } catch {
    throw new GatewayError('The gateway is not answering. Is it running?', 'unreachable');
  }
  // A proxy in front of a stopped gateway (the Vite dev server, a load balancer) answers 502-504.
  if (response.status >= 502 && response.status <= 504)
    throw new GatewayError(
      `The gateway is not answering (HTTP ${response.status}).`,
      'unreachable',
      response.status,
    );
  return response;
}

export function badAnswer(path: string, response: Response): GatewayError {
  return new GatewayError(
    `Unexpected answer from ${path} (HTTP ${response.status}).`,
    'bad_response',
    response.status,
  );
}
