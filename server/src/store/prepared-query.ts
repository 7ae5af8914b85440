import type { Compilable, CompiledQuery, Kysely } from 'kysely';
import type { Store } from './database.js';
import type { Database } from './schema.js';

/** Stands for a parameter while the query is compiled; replaced by its value at each run. */
const PLACEHOLDER = '\u0000paygate-parameter:';

/**
 * A query built and compiled once per store, then run with new parameter values. Kysely builds and
 * compiles a query on every call (tens of microseconds); the few queries run on every chat request
 * use this instead. `build` receives a stand-in for each parameter, to be used as a value only.
 */
export function preparedQuery<Params extends Record<string, unknown>, Row>(
  build: (
    db: Kysely<Database>,
    parameter: <K extends keyof Params & string>(name: K) => Params[K],
  ) => Compilable<Row>,
): (store: Store, params: Params) => Promise<Row[]> {
  const compiled = new WeakMap<Store, { query: CompiledQuery<Row>; slots: Array<string | undefined> }>();
  const compile = (store: Store) => {
    const query = build(store.db, (name) => `${PLACEHOLDER}${name}` as never).compile();
    const slots = query.parameters.map((value) =>
      typeof value === 'string' && value.startsWith(PLACEHOLDER)
        ? value.slice(PLACEHOLDER.length)
        : undefined,
    );
    return { query, slots };
  };
  return async (store, params) => {
    let prepared = compiled.get(store);
    if (!prepared) {
      prepared = compile(store);
      compiled.set(store, prepared);
    }
    const { query, slots } = prepared;
    const parameters = query.parameters.map((value, i) => {
      const name = slots[i];
      return name === undefined ? value : params[name];
    });
    const result = await store.db.executeQuery<Row>({ ...query, parameters });
    return result.rows;
  };
}
