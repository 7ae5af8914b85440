import type { FastifyBodyParser, FastifyInstance, FastifyRequest } from 'fastify';
import { ApiError } from './errors.js';

/**
 * JSON bodies are parsed by Fastify's own parser (its body limit, its answers to an empty or
 * malformed body), which refuses a `__proto__` key, or a `constructor` holding `prototype`,
 * anywhere in the body: such a key never reaches an object. It reports that body as not valid
 * JSON, though it is valid JSON; the refusal names the key instead.
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
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    parse(request, body as string, (error: Error | null, value?: unknown) => {
      const key = error && forbiddenKey(request, body as string);
      if (key) done(forbiddenKeyRefusal(key));
      else done(error, value);
    });
  });
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
