import { type AliasedRawBuilder, sql } from 'kysely';

/**
 * sum() of an int8 column that stays exact beyond 2^63 in both dialects: SQLite's sum() fails
 * on int8 overflow (9.2 million USD of pico-USD), so the column is summed in two parts, the
 * millions and the remainders, and joined back as a bigint by `readSum`.
 */
export function exactSum<A extends string>(
  column: string,
  alias: A,
): [AliasedRawBuilder<unknown, `${A}_hi`>, AliasedRawBuilder<unknown, `${A}_lo`>] {
  return [
    sql`sum(${sql.ref(column)} / 1000000)`.as(`${alias}_hi` as `${A}_hi`),
    sql`sum(${sql.ref(column)} % 1000000)`.as(`${alias}_lo` as `${A}_lo`),
  ];
}

export function readSum<A extends string>(row: Record<`${A}_hi` | `${A}_lo`, unknown>, alias: A): bigint {
  return toBigInt(row[`${alias}_hi`]) * 1_000_000n + toBigInt(row[`${alias}_lo`]);
}

/** An integer as the drivers return it: bigint (int8), string (pg numeric), null for an empty sum. */
export function toBigInt(value: unknown): bigint {
  if (value === null || value === undefined) return 0n;
  if (typeof value === 'bigint') return value;
  if (typeof value === 'string' && /^-?\d+$/.test(value)) return BigInt(value);
  if (typeof value === 'number' && Number.isSafeInteger(value)) return BigInt(value);
  throw new TypeError(`expected an integer from the database, got ${String(value)}`);
}
