import { GraphQLError, type GraphQLFormattedError } from 'graphql';
import mercurius, { type MercuriusContext } from 'mercurius';
import { GatewayError } from '../errors.js';
import { statusOf } from '../http/errors.js';
import { isStoreUnavailable } from '../store/database.js';

/** `extensions.code` of every error the endpoint answers with. */
export type GraphqlErrorCode =
  | 'GRAPHQL_PARSE_FAILED'
  | 'GRAPHQL_VALIDATION_FAILED'
  | 'BAD_USER_INPUT'
  | 'BAD_REQUEST'
  | 'UNAUTHENTICATED'
  | 'FORBIDDEN'
  | 'QUERY_TOO_DEEP'
  | 'QUERY_TOO_COMPLEX'
  | 'SERVICE_UNAVAILABLE'
  | 'INTERNAL_SERVER_ERROR';

/** An error a resolver or hook throws for the client to see. */
export function graphqlError(
  code: GraphqlErrorCode,
  message: string,
  statusCode = 200,
): InstanceType<typeof mercurius.ErrorWithProps> {
  return new mercurius.ErrorWithProps(message, { code }, statusCode);
}

interface ExecutionWithErrors {
  data?: unknown;
  errors: readonly GraphQLError[];
  statusCode?: number;
}

/**
 * Mercurius' status codes, with every error given an `extensions.code` and anything unexpected
 * masked as INTERNAL_SERVER_ERROR (and logged) instead of leaking its message.
 */
export function formatGraphqlErrors(execution: ExecutionWithErrors, context: MercuriusContext) {
  const { statusCode } = mercurius.defaultErrorFormatter(execution as never, context);
  const log = context.reply?.log ?? context.app.log;
  const errors = execution.errors.flatMap((error): GraphQLFormattedError[] => {
    const batch = validationBatch(error);
    if (batch) return batch.map((inner) => formatRequestError(inner as Error));
    return [formatExecutionError(error, log)];
  });
  // graphql-js refuses some requests only when executing them (an unknown operationName, several
  // operations and none named): nothing ran, so it is the request that is bad.
  const refusedRequest = !execution.data && execution.errors.some(isRequestError);
  return {
    statusCode: refusedRequest && statusCode === 200 ? 400 : (gatewayStatus(execution) ?? statusCode),
    response: { data: (execution.data ?? null) as null, errors },
  };
}

/** As Mercurius reads a lone error's `statusCode` when nothing ran: a gateway error's status (a refused body). */
function gatewayStatus(execution: ExecutionWithErrors): number | undefined {
  const [only, ...others] = execution.errors;
  if (execution.data || execution.statusCode !== undefined || others.length > 0) return undefined;
  return only?.originalError instanceof GatewayError ? statusOf(only.originalError) : undefined;
}

/** An error graphql-js raised about the request itself: no resolver behind it, no field path. */
function isRequestError(error: GraphQLError): boolean {
  return (
    error.originalError === undefined && error.path === undefined && error.extensions?.code === undefined
  );
}

/**
 * The errors from parsing and validating a request, which mercurius gathers under one error of its
 * own. Other errors carry an `errors` array too (pg's AggregateError when every address of the
 * database refuses): those are failures to mask, not the request's fault.
 */
function validationBatch(error: GraphQLError): unknown[] | undefined {
  const original = error.originalError as { code?: unknown; errors?: unknown } | undefined;
  return original?.code === 'MER_ERR_GQL_VALIDATION' && Array.isArray(original.errors)
    ? original.errors
    : undefined;
}

/** graphql-js' refusal of a document above the parser's `maxTokens` (its wording, typo included). */
const TOKEN_LIMIT_EXCEEDED = /^Syntax Error: Document contains more tha[nt] (\d+) tokens/;

/** One error of that batch, coded by what the request got wrong. */
function formatRequestError(error: Error): GraphQLFormattedError {
  const tokenLimit = TOKEN_LIMIT_EXCEEDED.exec(error.message)?.[1];
  if (tokenLimit)
    return withCode(
      new GraphQLError(`the query is longer than the limit of ${tokenLimit} tokens; send a shorter query`),
      'QUERY_TOO_COMPLEX',
    );
  const gql = error instanceof GraphQLError ? error : new GraphQLError(error.message);
  let code: GraphqlErrorCode = 'GRAPHQL_VALIDATION_FAILED';
  if (error.message.startsWith('Syntax Error')) code = 'GRAPHQL_PARSE_FAILED';
  else if (isVariableError(error)) code = 'BAD_USER_INPUT';
  return withCode(gql, code);
}

/** graphql-js' refusal of a request's variables: missing, or not of their declared type. */
export function isVariableError(error: Error): boolean {
  return error.message.startsWith('Variable "$');
}

function formatExecutionError(
  error: GraphQLError,
  log: { error(details: object, message: string): void },
): GraphQLFormattedError {
  const given = error.extensions?.code;
  if (typeof given === 'string') return error.toJSON();
  if (error.message.startsWith('Syntax Error')) return withCode(error, 'GRAPHQL_PARSE_FAILED');
  if (isRequestError(error)) return withCode(error, 'BAD_REQUEST');
  const original = error.originalError;
  const status =
    original instanceof GatewayError
      ? statusOf(original)
      : (original as { statusCode?: unknown } | undefined)?.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) return withCode(error, 'BAD_REQUEST');
  // The database away, or a query it cancelled (DATABASE_QUERY_TIMEOUT_MS): the client may retry.
  if (isStoreUnavailable(error.originalError)) {
    const unavailable = new GraphQLError('the ledger cannot be read now; retry shortly', {
      path: error.path,
      nodes: error.nodes,
    });
    return withCode(unavailable, 'SERVICE_UNAVAILABLE');
  }
  log.error({ err: error.originalError ?? error }, 'graphql resolver failed');
  const masked = new GraphQLError('internal error', { path: error.path, nodes: error.nodes });
  return withCode(masked, 'INTERNAL_SERVER_ERROR');
}

function withCode(error: GraphQLError, code: GraphqlErrorCode): GraphQLFormattedError {
  const json = error.toJSON();
  return { ...json, extensions: { ...json.extensions, code } };
}
