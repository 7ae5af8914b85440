import type { Address } from 'viem';
import type { PayerLock } from '../store/payer-lock.js';
import type { OutboxDeps } from './outbox/reconcile.js';
import { findSession } from './session-records.js';
import { settleSessionDebt } from './session-settlement.js';

export interface SettleOnCompletionOptions extends OutboxDeps {
  withPayerLock: PayerLock;
  log: { warn(details: object, message: string): void };
}

/**
 * Settles a session payer's debt in the background as soon as one of its requests is recorded,
 * instead of when its next request arrives. The ordering rule is unchanged: that next request still
 * takes the payer's lock when a settlement is in flight, so it is forwarded only once the debt is
 * confirmed; it usually finds nothing owed and goes straight through.
 */
export interface SettleOnCompletion {
  /** Queues a settlement of the payer's debt with the session's delegation; never throws. */
  settle(payer: Address, sessionId: string): void;
  /** Waits for the settlements queued or under way (shutdown). */
  drain(): Promise<void>;
}

export function settleOnCompletion(options: SettleOnCompletionOptions): SettleOnCompletion {
  // A payer's settlement queued but not started yet claims every record written before it starts,
  // so one queued per payer is enough; one under way has claimed its records already.
  const queued = new Set<Address>();
  const underWay = new Set<Promise<void>>();
  return {
    settle(payer, sessionId) {
      if (queued.has(payer)) return;
      queued.add(payer);
      let started = false;
      // Begun after the answer is written: on SQLite the settlement's first steps run synchronously.
      const job = new Promise<void>((resolve) => setImmediate(resolve))
        .then(() =>
          options.withPayerLock(payer, async () => {
            started = true;
            queued.delete(payer);
            const session = await findSession(options.store, sessionId);
            if (session) await settleSessionDebt(options, session);
          }),
        )
        .catch((error: unknown) => {
          // Another settlement may have been queued since this one started: that one stays queued.
          if (!started) queued.delete(payer);
          // Left owed: the payer's next request settles it (or answers 402), or the collector does.
          options.log.warn({ err: error, payer }, 'settling on completion failed; the debt stays owed');
        })
        .finally(() => underWay.delete(job));
      underWay.add(job);
    },
    async drain() {
      while (underWay.size > 0) await Promise.all(underWay);
    },
  };
}
