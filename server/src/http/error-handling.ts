import { type ServerResponse, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { ConnectionError, FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { SettlementStateError } from '../billing/settlements.js';
import { GatewayError } from '../errors.js';
import type { ShortfallReason } from '../payments/admission/index.js';
import type { RefusalReason } from '../payments/outbox/index.js';
import { servedPath } from '../served-path.js';
import { isStoreUnavailable } from '../store/database.js';
import { failure } from './envelope.js';
import { ApiError, type ErrorCode, errorBody, statusOf } from './errors.js';

interface SchemaIssue {
  keyword: string;
  instancePath: string;
  message?: string;
  params: Record<string, unknown>;
  parentSchema?: { description?: string };
}

export interface ErrorHandlingOptions {
  /** Told of each error a route's request is answered with: its route template, status and `refusalReason`. */
  onRefusal?(route: string | undefined, status: number, reason: string): void;
}

/** One place turns every error into the envelope; routes throw, they never format errors. */
export function installErrorHandling(app: FastifyInstance, options: ErrorHandlingOptions = {}): void {
  app.setErrorHandler<FastifyError>((error, request, reply) =>
    answerError(error, request, reply, options.onRefusal),
  );
  const allowedMethods = trackRoutes(app);
  const answerUnmatched = (request: FastifyRequest, reply: FastifyReply) => {
    const path = servedPath(request.url);
    const allowed = allowedMethods(path);
    if (allowed.length === 0 || allowed.includes(request.method))
      return sendError(
        reply,
        request,
        new ApiError(404, 'not_found', `no route for ${request.method} ${path}`),
      );
    const allow = allowed.join(', ');
    return sendError(
      reply,
      request,
      new ApiError(405, 'method_not_allowed', `${request.method} is not allowed on ${path}; use ${allow}`, {
        headers: { allow },
      }),
    );
  };
  app.setNotFoundHandler(answerUnmatched);
  // Answered before its body is read: parsing a body no route takes (up to BODY_LIMIT_BYTES of
  // JSON, a tenth of a second) is work for nothing, and a malformed one would answer 400, not 404.
  app.addHook('preParsing', (request, reply, payload, done) => {
    if (request.is404) answerUnmatched(request, reply);
    else done(null, payload);
  });
}

function answerError(
  error: FastifyError,
  request: FastifyRequest,
  reply: FastifyReply,
  onRefusal?: ErrorHandlingOptions['onRefusal'],
): FastifyReply {
  // The request's own stream failed while its body came (its client left, or stalled past
  // REQUEST_TIMEOUT_MS): the client's doing, not a fault (its ECONNRESET is not the database's).
  const apiError = error === request.raw.errored ? BODY_CUT_OFF() : toApiError(error);
  onRefusal?.(request.routeOptions.url, statusOf(apiError), refusalReason(apiError));
  if (statusOf(apiError) >= 500) request.log.error({ err: error }, 'request failed');
  else request.log.info({ code: apiError.code, message: apiError.message }, 'request refused');
  return sendError(reply, request, apiError);
}

/**
 * Fastify's `frameworkErrors`: a request refused before routing (a path that is not valid
 * percent-encoding), which runs no hook, so the request id is set here.
 */
export function answerFrameworkError(
  error: FastifyError,
  request: FastifyRequest,
  reply: FastifyReply,
): void {
  reply.header('x-request-id', request.id);
  answerError(error, request, reply);
}

/** The payment refusals' `details.reason` values counted as themselves; any other is `other`, so a label set stays bounded. */
const REFUSAL_REASONS = new Set<string>([
  'cap_reached',
  'expired',
  'revoked',
  'insufficient_balance',
  'invalid_delegation',
  'account_not_deployed',
  'reverted',
  'not_paid',
  'request_exceeds_cap',
  'requests_in_flight',
  'unproven_payer_limit',
  'upto_maximum_too_low',
  'unproven_exposure',
] satisfies Array<RefusalReason | ShortfallReason | 'unproven_exposure'>);

/** Why a request was refused, from a bounded set: its `details.reason` (a payment refusal), else its error code. */
function refusalReason(error: GatewayError): string {
  const reason = error.options.details?.reason;
  if (reason === undefined) return error.code;
  return typeof reason === 'string' && REFUSAL_REASONS.has(reason) ? reason : 'other';
}

const BODY_CUT_OFF = () =>
  new ApiError(400, 'validation_error', 'the connection closed before the body ended');

/** What a connection that never made a whole request is told, by Node's error code. */
const CLIENT_ERRORS: Record<string, () => ApiError> = {
  ERR_HTTP_REQUEST_TIMEOUT: () =>
    new ApiError(408, 'request_timeout', 'the request was not received in time; send it whole, faster'),
  HPE_HEADER_OVERFLOW: () =>
    new ApiError(431, 'payload_too_large', 'the request headers are larger than the gateway accepts'),
};

/**
 * Fastify's `clientErrorHandler`: a connection's error before its request was whole (it stalled
 * past REQUEST_TIMEOUT_MS, its headers overflowed, it is not HTTP). No request or reply exists
 * (or none that can still answer), so the envelope is written on the socket, under a new request
 * id, as Node would write its bare status line, and the connection is closed.
 */
export function clientErrorHandler(newRequestId: () => string) {
  return function answerClientError(this: FastifyInstance, error: ConnectionError, socket: Socket): void {
    // Reset by the client: nobody is left to answer.
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    const apiError =
      CLIENT_ERRORS[error.code]?.() ?? new ApiError(400, 'validation_error', 'the request is not valid HTTP');
    const id = newRequestId();
    // The error's own code and message only: Node attaches the raw request bytes to a parse error
    // (`rawPacket`), credentials included, which the log must never carry.
    this.log.info(
      { reqId: id, code: apiError.code, reason: { code: error.code, message: error.message } },
      'connection refused',
    );
    // As Node does: nothing is written into an answer that has begun (a pipelined request's).
    const inFlight = (socket as Socket & { _httpMessage?: ServerResponse })._httpMessage;
    if (socket.writable && !inFlight?.headersSent) {
      const body = JSON.stringify(failure(apiError.toBody(), inFlight?.req?.url ?? ''));
      socket.write(
        `HTTP/1.1 ${apiError.statusCode} ${STATUS_CODES[apiError.statusCode]}\r\n` +
          `content-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\n` +
          `x-request-id: ${id}\r\nconnection: close\r\n\r\n${body}`,
      );
    }
    socket.destroy(error);
  };
}

/** Remembers the routes as registered, so a known path asked with another method gets 405, not 404. */
function trackRoutes(app: FastifyInstance): (path: string) => string[] {
  const routes: Array<{ pattern: RegExp; methods: string[] }> = [];
  app.addHook('onRoute', (route) => {
    routes.push({ pattern: pathPattern(route.url), methods: [route.method].flat() });
  });
  return (path) =>
    [...new Set(routes.filter((route) => route.pattern.test(path)).flatMap((route) => route.methods))].sort();
}

function pathPattern(url: string): RegExp {
  const source = url
    .split(/(:[^/]+|\*)/)
    .map((token) => {
      if (token === '*') return '.*';
      if (token.startsWith(':')) return '[^/]+';
      return token.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    })
    .join('');
  return new RegExp(`^${source}$`);
}

export function sendError(reply: FastifyReply, request: FastifyRequest, error: GatewayError): FastifyReply {
  if (error.options.headers) reply.headers(error.options.headers);
  return reply
    .code(statusOf(error))
    .type('application/json')
    .send({ ...error.options.envelopeFields, ...failure(errorBody(error), request.url) });
}

const BY_FASTIFY_CODE: Record<string, [number, ErrorCode, string]> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: [415, 'unsupported_media_type', 'send the body as application/json'],
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: [400, 'validation_error', 'content-length does not match the body'],
  FST_ERR_CTP_BODY_TOO_LARGE: [
    413,
    'payload_too_large',
    'the request body is larger than the gateway accepts',
  ],
  FST_ERR_CTP_EMPTY_JSON_BODY: [400, 'invalid_json', 'the body is empty; send a JSON object'],
  FST_ERR_CTP_INVALID_JSON_BODY: [400, 'invalid_json', 'the body is not valid JSON'],
  FST_ERR_BAD_URL: [400, 'validation_error', 'the path is not valid percent-encoding'],
};

function toApiError(error: FastifyError): GatewayError {
  if (error instanceof GatewayError) return error;
  if (error.validation)
    return fromSchemaIssues(error.validation as unknown as SchemaIssue[], error.validationContext);
  const known = error.code ? BY_FASTIFY_CODE[error.code] : undefined;
  if (known) return new ApiError(known[0], known[1], known[2]);
  if (error instanceof SyntaxError && error.statusCode === 400)
    return new ApiError(400, 'invalid_json', 'the body is not valid JSON');
  if (error.statusCode === 429) return new ApiError(429, 'rate_limited', error.message);
  if (isStoreUnavailable(error))
    return new ApiError(503, 'service_unavailable', "the gateway's ledger cannot be reached; retry shortly", {
      headers: { 'retry-after': '2' },
    });
  // Another instance finished the payer's settlement meanwhile (this one lost its lock connection):
  // nothing was decided wrongly, the next attempt reads the settlement as it is now.
  if (error instanceof SettlementStateError)
    return new ApiError(
      503,
      'payments_unavailable',
      "this payer's settlement changed while it was settled; retry shortly",
      {
        headers: { 'retry-after': '2' },
      },
    );
  if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500)
    return new ApiError(
      error.statusCode,
      error.statusCode === 401 ? 'unauthorized' : 'validation_error',
      error.message,
    );
  return new ApiError(500, 'internal_error', 'the gateway failed to handle this request');
}

/**
 * Names the field at fault as a JS-like path (`messages[0].content`). For unions (anyOf) the
 * branch errors are noise: the union's own description says what is allowed.
 */
function fromSchemaIssues(issues: SchemaIssue[], context: string | undefined): ApiError {
  const last = issues[issues.length - 1];
  const issue = last && (last.keyword === 'anyOf' || last.keyword === 'oneOf') ? last : issues[0];
  if (!issue) return new ApiError(400, 'validation_error', 'the request is invalid');
  let field = toFieldPath(issue.instancePath);
  if (issue.keyword === 'required') field = joinField(field, String(issue.params.missingProperty));
  if (issue.keyword === 'additionalProperties')
    field = joinField(field, String(issue.params.additionalProperty));
  if (!field) field = context ?? 'body';
  return new ApiError(400, 'validation_error', `${field} ${describeIssue(issue)}`, { field });
}

const TYPE_NAMES: Record<string, string> = {
  number: 'a number',
  integer: 'an integer',
  string: 'a string',
  boolean: 'a boolean',
  array: 'an array',
  object: 'an object',
  null: 'null',
};

/** What is wrong, in words; a schema's own `description` says it best for bounds and patterns. */
function describeIssue(issue: SchemaIssue): string {
  const { params } = issue;
  const limit = Number(params.limit);
  switch (issue.keyword) {
    case 'required':
      return 'is required';
    case 'additionalProperties':
      return 'is not a known field';
    case 'const':
      return `must be ${JSON.stringify(params.allowedValue)}`;
    case 'enum':
      return `must be one of ${(params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
    case 'type':
      return `must be ${String(params.type)
        .split(',')
        .map((type) => TYPE_NAMES[type] ?? type)
        .join(' or ')}`;
  }
  if (issue.parentSchema?.description) return issue.parentSchema.description;
  switch (issue.keyword) {
    case 'minItems':
      return `must have at least ${limit} item${limit === 1 ? '' : 's'}`;
    case 'maxItems':
      return `must have at most ${limit} item${limit === 1 ? '' : 's'}`;
    case 'minLength':
      return limit === 1 ? 'must not be empty' : `must be at least ${limit} characters long`;
    case 'maxLength':
      return `must be at most ${limit} characters long`;
    default:
      return issue.message ?? 'is invalid';
  }
}

function toFieldPath(pointer: string): string {
  return pointer
    .split('/')
    .slice(1)
    .map((token) => token.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((path, token) => joinField(path, token), '');
}

function joinField(path: string, token: string): string {
  if (/^\d+$/.test(token)) return `${path}[${token}]`;
  return path ? `${path}.${token}` : token;
}
