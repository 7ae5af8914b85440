import { readFileSync } from 'node:fs';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { type DocumentNode, getOperationAST, Kind, parse } from 'graphql';
import mercurius, { type IResolvers, type MercuriusContext } from 'mercurius';
import { authenticateCaller } from '../auth/jwt.js';
import type { Store } from '../store/database.js';
import { isSessionActive } from '../store/sessions.js';
import { formatGraphqlErrors, graphqlError } from './errors.js';
import { enforceOperationLimits, enforceQuerySize, MAX_QUERY_TOKENS } from './limits.js';
import { type OperatorSources, operatorResolvers } from './operator.js';
import { type LedgerContext, ledgerResolvers } from './resolvers.js';

export interface GraphqlOptions {
  store: Store;
  /** ADMIN_TOKEN: lets the operator query any wallet. */
  adminToken?: string;
  /** Defaults to schema.graphql at the repository root (the same path from src/ and dist/). */
  schemaFile?: string | URL;
  /** What the operator's view reads besides the ledger. */
  operator?: OperatorSources;
}

const SCHEMA_FILE = new URL('../../../schema.graphql', import.meta.url);

/**
 * GraphQL at /graphql over the ledger. Registered as an encapsulated plugin: mercurius installs
 * its own error handler, which must not replace the gateway's envelope for other routes.
 */
export default async function graphqlRoutes(app: FastifyInstance, options: GraphqlOptions): Promise<void> {
  const { store, adminToken } = options;
  await app.register(mercurius, {
    schema: readFileSync(options.schemaFile ?? SCHEMA_FILE, 'utf8'),
    resolvers: withOperatorView(ledgerResolvers(), operatorResolvers(options.operator ?? {})),
    path: '/graphql',
    graphiql: false,
    // `maxTokens` (graphql 16's name; `maxLexicalTokens` is newer): mercurius recognises its error
    // and does not retry the text as a JSON syntax tree.
    graphql: { parseOptions: { maxTokens: MAX_QUERY_TOKENS } },
    errorFormatter: formatGraphqlErrors,
    context: (request: FastifyRequest): Promise<LedgerContext> => callerContext(request, store, adminToken),
  });
  app.graphql.addHook('preParsing', async (_schema, source, context) => {
    enforceQuerySize(source);
    if (context.reply?.request.method === 'GET') enforceNamedOperation(source, requestedOperation(context));
  });
  app.graphql.addHook('preValidation', async (_schema, document) => {
    // Mercurius takes a query that fails to parse but is JSON as a ready-made syntax tree; only the
    // parser's own documents reach validation. Their `loc` is a Location, whose method JSON cannot forge.
    if (typeof (document as Partial<DocumentNode> | null)?.loc?.toJSON !== 'function')
      throw graphqlError('GRAPHQL_PARSE_FAILED', 'the query is not a GraphQL document', 400);
  });
  app.graphql.addHook('preExecution', async (schema, document, context, variables) => {
    // A GET request's `variables` is any JSON text; graphql-js asserts (and so fails) on a non-object.
    if (variables != null && (typeof variables !== 'object' || Array.isArray(variables)))
      throw graphqlError('BAD_USER_INPUT', 'variables must be a JSON object', 400);
    enforceOperationLimits(schema, document, variables, requestedOperation(context));
  });
}

function withOperatorView(ledger: IResolvers, operator: IResolvers): IResolvers {
  return { ...ledger, ...operator, Query: { ...(ledger.Query as object), ...(operator.Query as object) } };
}

async function callerContext(
  request: FastifyRequest,
  store: Store,
  adminToken?: string,
): Promise<LedgerContext> {
  try {
    const caller = await authenticateCaller(request, {
      adminToken,
      isSessionActive: (sessionId, wallet) => isSessionActive(store, sessionId, wallet),
    });
    return { store, caller };
  } catch (error) {
    return { store, caller: null, authError: error as Error };
  }
}

/** The request's operationName, which mercurius does not hand its hooks. */
function requestedOperation(context: MercuriusContext): string | undefined {
  const request = context.reply?.request;
  const params = request?.method === 'POST' ? request.body : request?.query;
  const name = (params as { operationName?: unknown } | undefined)?.operationName;
  return typeof name === 'string' ? name : undefined;
}

/**
 * Mercurius refuses mutations over GET by reading the operation a GET request runs, which fails (an
 * internal error) when the request names none: an unknown operationName, or several operations and
 * no name. Refused here first, in graphql-js' words over POST. The query text is parsed once more,
 * but it fits in a URL; one that does not parse, or holds no operation, fails mercurius' validation.
 */
function enforceNamedOperation(source: string, operationName: string | undefined): void {
  let document: DocumentNode;
  try {
    document = parse(source, { maxTokens: MAX_QUERY_TOKENS });
  } catch {
    return;
  }
  const hasOperation = document.definitions.some(
    (definition) => definition.kind === Kind.OPERATION_DEFINITION,
  );
  if (!hasOperation || getOperationAST(document, operationName)) return;
  throw graphqlError(
    'BAD_REQUEST',
    operationName === undefined
      ? 'Must provide operation name if query contains multiple operations.'
      : `Unknown operation named "${operationName}".`,
    400,
  );
}
