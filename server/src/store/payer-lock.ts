import type pg from 'pg';
import type { Address } from 'viem';

/** Runs `fn` while no other holder of the same payer's lock runs. */
export type PayerLock = <T>(payer: Address, fn: () => Promise<T>) => Promise<T>;

/** Raised when another gateway instance holds a payer's lock longer than the lock timeout. */
export class PayerLockTimeoutError extends Error {
  constructor(readonly payer: Address) {
    super(`payer ${payer} is being settled by another gateway instance; try again`);
    this.name = 'PayerLockTimeoutError';
  }
}

/** A mutex per key, in this process; a key's entry is dropped once nobody waits on it. */
export class KeyedMutex {
  readonly #tails = new Map<string, Promise<void>>();

  async run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.#tails.get(key) ?? Promise.resolve();
    let release!: () => void;
    const current = new Promise<void>((resolve) => {
      release = resolve;
    });
    const tail = previous.then(() => current);
    this.#tails.set(key, tail);
    await previous;
    try {
      return await fn();
    } finally {
      release();
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    }
  }
}

/** Runs `fn` while no other holder of the same key's lock runs. */
export type KeyedLock = <T>(key: string, fn: () => Promise<T>) => Promise<T>;

/** Raised when another gateway instance holds a lock longer than the lock timeout. */
export class LockTimeoutError extends Error {
  constructor(readonly key: string) {
    super(`${key} is held by another gateway instance; try again`);
    this.name = 'LockTimeoutError';
  }
}

/** SQLite mode: one gateway process owns the file, so an in-process mutex serializes a payer. */
export function processPayerLock(): PayerLock {
  return processLock();
}

/** One process: an in-process mutex per key. */
export function processLock(): KeyedLock {
  const mutex = new KeyedMutex();
  return (key, fn) => mutex.run(key, fn);
}

const LOCK_TIMEOUT_CODE = '55P03';

/**
 * The advisory lock id of the key `$1`. Advisory locks belong to the database, not the schema: the
 * schema is part of the key, so deployments in separate schemas of one database never share a lock.
 */
export const ADVISORY_LOCK_ID = `hashtextextended(coalesce(current_schema(), '') || '/' || $1, 0)`;

/**
 * PostgreSQL mode: a session-level advisory lock keyed by the payer, so every gateway instance
 * sharing the database serializes the same payer.
 */
export function advisoryPayerLock(lockPool: pg.Pool, timeouts: AdvisoryLockTimeouts): PayerLock {
  const lock = advisoryLock(lockPool, timeouts);
  return async (payer, fn) => {
    const key = `paygate:payer:${payer}`;
    try {
      return await lock(key, fn);
    } catch (error) {
      if (error instanceof LockTimeoutError && error.key === key) throw new PayerLockTimeoutError(payer);
      throw error;
    }
  };
}

export interface AdvisoryLockTimeouts {
  /** How long to wait for a lock another instance holds. */
  lockMs: number;
  /** How long any query may go unanswered (its connection is dead); 0: no bound. */
  queryMs: number;
}

/**
 * A session-level advisory lock per key, shared by every gateway instance on the database. Locks
 * are held on connections of their own pool: waiting for a lock must never starve the query pool
 * that the lock holder needs. Within this process an in-process mutex queues first, so one key
 * takes one lock connection.
 */
export function advisoryLock(lockPool: pg.Pool, timeouts: AdvisoryLockTimeouts): KeyedLock {
  const mutex = new KeyedMutex();
  // Taken at once if free (the usual case), so that a dead connection is found within the query
  // timeout; only a lock another instance holds is waited for, up to the lock timeout.
  const wait = {
    text: `with timeout as (select set_config('lock_timeout', $2, false))
           select pg_advisory_lock(${ADVISORY_LOCK_ID}) from timeout`,
    ...(timeouts.queryMs > 0 && { query_timeout: timeouts.lockMs + timeouts.queryMs }),
  };
  return (key, fn) =>
    mutex.run(key, async () => {
      const client = await lockPool.connect();
      let broken = false;
      try {
        try {
          const taken = await client.query<{ taken: boolean }>(
            `select pg_try_advisory_lock(${ADVISORY_LOCK_ID}) as taken`,
            [key],
          );
          if (!taken.rows[0]?.taken)
            await client.query({ ...wait, values: [key, `${Math.floor(timeouts.lockMs)}ms`] });
        } catch (error) {
          if ((error as { code?: string }).code === LOCK_TIMEOUT_CODE) throw new LockTimeoutError(key);
          broken = true;
          throw error;
        }
        try {
          return await fn();
        } finally {
          try {
            await client.query(`select pg_advisory_unlock(${ADVISORY_LOCK_ID})`, [key]);
          } catch {
            // Dropping the connection releases its session locks.
            broken = true;
          }
        }
      } finally {
        client.release(broken);
      }
    });
}
