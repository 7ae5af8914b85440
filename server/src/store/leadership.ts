import type pg from 'pg';
import { ADVISORY_LOCK_ID } from './payer-lock.js';

/**
 * A role one gateway instance holds at a time (e.g. the collector). Holding it is an economy,
 * not a guarantee the ledger relies on: every settlement still runs under its payer's lock, so two
 * instances that briefly both believe they lead do the same work twice, never pay twice.
 */
export interface Leadership {
  /** Takes the role when it is free and confirms it is still held; false while another instance holds it. */
  acquire(): Promise<boolean>;
  /** Gives the role up, so another instance takes it at once rather than when this one's connection dies. */
  release(): Promise<void>;
}

/** SQLite mode: the one process that owns the file always leads. */
export const soleLeadership: Leadership = {
  acquire: async () => true,
  release: async () => {},
};

/**
 * PostgreSQL mode: a session-level advisory lock, taken without waiting, on a connection this
 * instance keeps. The lock lives as long as that connection: an instance that dies or loses the
 * database loses the role, and another takes it on its next attempt.
 */
export function advisoryLeadership(lockPool: pg.Pool, name: string): Leadership {
  const key = `paygate:leader:${name}`;
  let holder: pg.PoolClient | undefined;

  const drop = () => {
    holder?.release(true);
    holder = undefined;
  };

  return {
    async acquire() {
      if (holder) {
        try {
          await holder.query('select 1');
          return true;
        } catch {
          drop();
        }
      }
      const candidate = await lockPool.connect();
      try {
        const { rows } = await candidate.query<{ held: boolean }>(
          `select pg_try_advisory_lock(${ADVISORY_LOCK_ID}) as held`,
          [key],
        );
        if (rows[0]?.held) {
          holder = candidate;
          return true;
        }
        candidate.release();
        return false;
      } catch (error) {
        candidate.release(true);
        throw error;
      }
    },
    async release() {
      if (!holder) return;
      try {
        await holder.query(`select pg_advisory_unlock(${ADVISORY_LOCK_ID})`, [key]);
        holder.release();
        holder = undefined;
      } catch {
        // Closing the connection gives the lock up too.
        drop();
      }
    },
  };
}
