import type { Readable } from 'node:stream';
import { errorCodes, type FastifyBodyParser, type FastifyInstance, type FastifyRequest } from 'fastify';
import { ApiError } from './errors.js';
import { JsonShapeScan } from './json-shape-scan.js';

/**
 * JSON bodies are scanned as they arrive (json-shape-scan.ts): one nesting too deep or holding too
 * many values is refused before JSON.parse would block the event loop on it. The rest are parsed by
 * Fastify's own parser (its answers to an empty or malformed body), which refuses a `__proto__`
 * key, or a `constructor` holding `prototype`, anywhere in the body: such a key never reaches an
 * object. It reports that body as not valid JSON, though it is valid JSON; the refusal names the
 * key instead.
 */
export function parseJsonBodies(app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser('error', 'error');
  const parseAnyKey = app.getDefaultJsonParser('ignore', 'ignore');
  const parseRefusingProto = app.getDefaultJsonParser('error', 'ignore');
  /** The key a body was refused for (none when it is not JSON): parsed again, but only once refused. */
  const forbiddenKey = (request: FastifyRequest, body: string): string | undefined => {
    if (refuses(parseAnyKey, request, body)) return undefined;
    return refuses(parseRefusingProto, request, body) ? '__proto__' : 'constructor.prototype';
  };
  app.addContentTypeParser('application/json', (request, payload, done) => {
    readScanned(request, payload, (readError, body = '') => {
      if (readError) done(readError);
      else
        parse(request, body, (error: Error | null, value?: unknown) => {
          const key = error && forbiddenKey(request, body);
          if (key) done(forbiddenKeyRefusal(key));
          else done(error, value);
        });
    });
  });
}

/**
 * The body as text, read as Fastify's `parseAs: 'string'` reads it (its body limit, its
 * content-length check, decoded once whole so a character split across chunks stays intact), each
 * chunk scanned as it arrives: a refused body is read no further.
 */
function readScanned(
  request: FastifyRequest,
  payload: Readable,
  done: (error: Error | null, body?: string) => void,
): void {
  const limit = request.routeOptions.bodyLimit;
  const declared = Number(request.headers['content-length']);
  if (declared > limit) {
    done(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
    return;
  }
  const scan = new JsonShapeScan();
  const chunks: Buffer[] = [];
  let received = 0;
  const finish = (error: Error | null, body?: string) => {
    payload.off('data', onData).off('end', onEnd).off('error', onError);
    done(error, body);
  };
  function onData(chunk: Buffer): void {
    received += chunk.length;
    const refusal = received > limit ? new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE() : scan.take(chunk);
    if (refusal) finish(refusal);
    else chunks.push(chunk);
  }
  function onEnd(): void {
    if (!Number.isNaN(declared) && received !== declared)
      finish(new errorCodes.FST_ERR_CTP_INVALID_CONTENT_LENGTH());
    else finish(null, Buffer.concat(chunks, received).toString('utf8'));
  }
  function onError(error: Error & { statusCode?: number }): void {
    if (!(typeof error.statusCode === 'number' && error.statusCode >= 400)) error.statusCode = 400;
    finish(error);
  }
  payload.on('data', onData).on('end', onEnd).on('error', onError);
  payload.resume();
}

function forbiddenKeyRefusal(key: string): ApiError {
  return new ApiError(
    400,
    'invalid_json',
    `the key ${key} is refused anywhere in the body (it could reach an object's prototype); remove it`,
  );
}

/** Fastify's JSON parser answers before it returns. */
function refuses(parser: FastifyBodyParser<string>, request: FastifyRequest, body: string): boolean {
  let refused = false;
  parser(request, body, (error: Error | null) => {
    refused = error !== null;
  });
  return refused;
}
