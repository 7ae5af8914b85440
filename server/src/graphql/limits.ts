import { type DocumentNode, type GraphQLSchema, Kind } from 'graphql';
import { type ComplexityEstimator, getComplexity, simpleEstimator } from 'graphql-query-complexity';
import { graphqlError } from './errors.js';

/** Deepest nesting accepted: settlements > records > node > cost > total > usd fits, loops through settlement > records do not. */
export const MAX_QUERY_DEPTH = 10;
/** Roughly the fields resolved: two full pages of 100 usage records with their settlements. */
export const MAX_QUERY_COMPLEXITY = 10_000;
export const MAX_PAGE_SIZE = 100;
const MAX_QUERY_NODES = 2_000;

/** A connection's selection costs `first` times over. */
const pagedEstimator: ComplexityEstimator = ({ args, childComplexity }) =>
  typeof args.first === 'number' ? 1 + childComplexity * Math.max(0, args.first) : undefined;

const estimators = [pagedEstimator, simpleEstimator({ defaultComplexity: 1 })];

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
        `the query's complexity is ${complexity}, above the limit of ${MAX_QUERY_COMPLEXITY}; ask for fewer items or fields`,
        400,
      );
  }
}
