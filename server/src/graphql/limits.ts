import { type DocumentNode, type GraphQLSchema, Kind } from 'graphql';
import { type ComplexityEstimator, getComplexity, simpleEstimator } from 'graphql-query-complexity';
import { graphqlError } from './errors.js';

/** Deepest nesting accepted: settlements > records > node > cost > total > usd fits, loops through settlement > records do not. */
export const MAX_QUERY_DEPTH = 10;
/** Roughly the fields resolved: two full pages of 100 usage records with their settlements. */
export const MAX_QUERY_COMPLEXITY = 10_000;
export const MAX_PAGE_SIZE = 100;
const MAX_QUERY_NODES = 2_000;
/**
 * Parsing and validating run on the event loop before any other limit is checked, in time growing
 * with the document (seconds for a body-limit-sized one). The dashboard's largest query is about 100
 * tokens and 500 bytes; 5,000 tokens still spell out more selections than MAX_QUERY_NODES lets run,
 * and 64 KiB leaves them 13 bytes each for names, spacing and string arguments.
 */
export const MAX_QUERY_TOKENS = 5_000;
const MAX_QUERY_BYTES = 64 * 1024;
/**
 * A field summing a payer's whole history (or a date range of it) in the database, where a page
 * reads at most `first` rows: fewer than ten fit in MAX_QUERY_COMPLEXITY, and the dashboard asks
 * for two per request.
 */
const AGGREGATE_COMPLEXITY = 1_000;
const AGGREGATE_FIELDS: ReadonlySet<string> = new Set(['Query.spend', 'Me.debt', 'Me.totals']);

/** A connection's selection costs `first` times over. */
const pagedEstimator: ComplexityEstimator = ({ args, childComplexity }) =>
  typeof args.first === 'number' ? 1 + childComplexity * Math.max(0, args.first) : undefined;

const aggregateEstimator: ComplexityEstimator = ({ type, field, childComplexity }) =>
  AGGREGATE_FIELDS.has(`${type.name}.${field.name}`) ? AGGREGATE_COMPLEXITY + childComplexity : undefined;

const estimators = [aggregateEstimator, pagedEstimator, simpleEstimator({ defaultComplexity: 1 })];

/** Refuses a query text too long to parse and validate quickly, before parsing it. */
export function enforceQuerySize(source: string): void {
  const bytes = Buffer.byteLength(source);
  if (bytes > MAX_QUERY_BYTES)
    throw graphqlError(
      'QUERY_TOO_COMPLEX',
      `the query is ${bytes} bytes long, above the limit of ${MAX_QUERY_BYTES}; send a shorter query`,
      400,
    );
}

/** Refuses an operation whose estimated cost is above the limit (checked for every operation in the document). */
export function enforceComplexity(
  schema: GraphQLSchema,
  document: DocumentNode,
  variables: Record<string, unknown> | undefined,
): void {
  const operations = document.definitions.flatMap((definition) =>
    definition.kind === Kind.OPERATION_DEFINITION ? [definition.name?.value] : [],
  );
  for (const operationName of operations) {
    let complexity: number;
    try {
      complexity = getComplexity({
        schema,
        query: document,
        variables,
        operationName,
        estimators,
        maxQueryNodes: MAX_QUERY_NODES,
      });
    } catch (error) {
      throw graphqlError('QUERY_TOO_COMPLEX', (error as Error).message, 400);
    }
    if (complexity > MAX_QUERY_COMPLEXITY)
      throw graphqlError(
        'QUERY_TOO_COMPLEX',
        `the query's complexity is ${complexity}, above the limit of ${MAX_QUERY_COMPLEXITY}; ask for fewer items or fields (spend, debt and totals cost ${AGGREGATE_COMPLEXITY} each)`,
        400,
      );
  }
}
