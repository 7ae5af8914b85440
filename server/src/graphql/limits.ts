import {
  type DocumentNode,
  type GraphQLSchema,
  getOperationAST,
  Kind,
  type OperationDefinitionNode,
  type SelectionNode,
  type SelectionSetNode,
} from 'graphql';
import { type ComplexityEstimator, getComplexity, simpleEstimator } from 'graphql-query-complexity';
import { graphqlError, isVariableError } from './errors.js';

/**
 * Deepest nesting accepted: settlements > records > node > cost > total > usd fits, loops through
 * settlement > records do not. Introspection is not counted (see INTROSPECTION_FIELDS).
 */
const MAX_QUERY_DEPTH = 10;
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
 * for two per request. Introspection's entry points cost as much: each walks the schema, resolving
 * hundreds of fields for a handful of selections (the node limit alone let a request walk it 200 times).
 */
const AGGREGATE_COMPLEXITY = 1_000;
const AGGREGATE_FIELDS: ReadonlySet<string> = new Set([
  'Query.spend',
  'Me.debt',
  'Me.totals',
  'Operator.economics',
  'Operator.exposure',
  'Operator.topDebtors',
  'Query.__schema',
  'Query.__type',
]);
/**
 * A connection runs a database query for every parent it is selected under, however few items it
 * asks for, holding SQLite's event loop as long as a hundred fields or more take to resolve. Charged
 * per call: a page of 100 usage records with each settlement's records(first: 0) ran 101 queries
 * for about 400 points.
 */
const PAGE_COMPLEXITY = 100;
/**
 * Introspection is bounded by the schema rather than by the depth limit: graphql-js' validation
 * refuses its lists of fields, interfaces or possible types nested three deep (MaxIntrospectionDepthRule),
 * while its own getIntrospectionQuery(), which code generators and API clients send, nests 15 deep.
 */
const INTROSPECTION_FIELDS: ReadonlySet<string> = new Set(['__schema', '__type']);

/** A connection costs its query, and its selection `first` times over. */
const pagedEstimator: ComplexityEstimator = ({ args, childComplexity }) =>
  typeof args.first === 'number' ? PAGE_COMPLEXITY + childComplexity * Math.max(0, args.first) : undefined;

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

/**
 * Refuses the operation the request runs when it nests too deep or costs too much; the document's
 * other operations never run. One that cannot run (no operation of that name) is left to graphql-js.
 */
export function enforceOperationLimits(
  schema: GraphQLSchema,
  document: DocumentNode,
  variables: Record<string, unknown> | undefined,
  operationName: string | undefined,
): void {
  const operation = getOperationAST(document, operationName);
  if (!operation) return;
  const depth = operationDepth(document, operation);
  if (depth > MAX_QUERY_DEPTH)
    throw graphqlError(
      'QUERY_TOO_DEEP',
      `the query nests fields ${depth} deep, above the limit of ${MAX_QUERY_DEPTH}; ask for fewer nested fields`,
      400,
    );
  enforceComplexity(schema, document, variables, operation.name?.value);
}

/**
 * How many fields deep an operation nests (the document is validated: its fragments exist and do
 * not cycle). A fragment adds no level; each is measured once, as spreads of spreads multiply paths.
 */
function operationDepth(document: DocumentNode, operation: OperationDefinitionNode): number {
  const fragments = new Map<string, SelectionSetNode>();
  for (const definition of document.definitions)
    if (definition.kind === Kind.FRAGMENT_DEFINITION)
      fragments.set(definition.name.value, definition.selectionSet);
  const fragmentDepths = new Map<string, number>();
  const setDepth = (selectionSet: SelectionSetNode | undefined): number =>
    Math.max(0, ...(selectionSet?.selections ?? []).map(selectionDepth));
  const selectionDepth = (selection: SelectionNode): number => {
    if (selection.kind === Kind.INLINE_FRAGMENT) return setDepth(selection.selectionSet);
    if (selection.kind === Kind.FIELD)
      return INTROSPECTION_FIELDS.has(selection.name.value) ? 0 : 1 + setDepth(selection.selectionSet);
    const name = selection.name.value;
    let depth = fragmentDepths.get(name);
    if (depth === undefined) {
      depth = setDepth(fragments.get(name));
      fragmentDepths.set(name, depth);
    }
    return depth;
  };
  return setDepth(operation.selectionSet);
}

function enforceComplexity(
  schema: GraphQLSchema,
  document: DocumentNode,
  variables: Record<string, unknown> | undefined,
  operationName: string | undefined,
): void {
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
    // Above the node limit, or variables that do not coerce: mercurius has graphql-js check them only
    // when the request sends some, and they are refused as it refuses them.
    const code = isVariableError(error as Error) ? 'BAD_USER_INPUT' : 'QUERY_TOO_COMPLEX';
    throw graphqlError(code, (error as Error).message, 400);
  }
  if (complexity > MAX_QUERY_COMPLEXITY)
    throw graphqlError(
      'QUERY_TOO_COMPLEX',
      `the query's complexity is ${complexity}, above the limit of ${MAX_QUERY_COMPLEXITY}; ask for fewer items or fields (spend, debt and totals cost ${AGGREGATE_COMPLEXITY} each, as do the operator's economics, exposure and topDebtors, __schema and __type; a page ${PAGE_COMPLEXITY} plus first times its fields)`,
      400,
    );
}
