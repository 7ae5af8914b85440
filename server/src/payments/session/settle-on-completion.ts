import type { Address } from 'viem';
import type { PayerLock } from '../../store/payer-lock.js';
import { findSession } from './session-records.js';
import { type SessionSettlementDeps, settleSessionDebt } from './session-settlement.js';

export interface SettleOnCompletionOptions extends SessionSettlementDeps {
  withPayerLock: PayerLock;
  /** SETTLE_ON_COMPLETION: every paid request is settled on completion, not only those near their session's end. */
  everyRequest: boolean;
  /**
   * Requests of a session ending within this time are settled on completion whatever `everyRequest`
   * says: the collector's next run could come after the session's delegation stopped paying.
   */
  sessionsEndingWithinMs: number;
  log: { warn(details: object, message: string): void };
}

/**
 * Settles a session payer's debt in the background as soon as one of its requests is recorded,
 * instead of when its next request arrives. The ordering rule is unchanged: that next request still
 * takes the payer's lock when a settlement is in flight, so it is forwarded only once the debt is
 * confirmed; it usually finds nothing owed and goes straight through.
 */
export interface SettleOnCompletion {
  /**
   * Queues a settlement of the payer's debt with the session's delegation, when every request is
   * settled on completion or the session ends soon; never throws.
   */
  settle(payer: Address, session: { id: string; expiresAt: Date }): void;
  /** Waits for the settlements queued or under way (shutdown). */
  drain(): Promise<void>;
}

export function settleOnCompletion(options: SettleOnCompletionOptions): SettleOnCompletion {
  // A payer's settlement queued but not started yet claims every record written before it starts,
  // so one queued per payer is enough; one under way has claimed its records already.
  const queued = new Set<Address>();
  const underWay = new Set<Promise<void>>();
  // A date compared, no store read: requests far from their session's end cost nothing more.
  const settlesNow = (sessionExpiresAt: Date) =>
    options.everyRequest || sessionExpiresAt.getTime() - Date.now() <= options.sessionsEndingWithinMs;
  return {
    settle(payer, session) {
      if (!settlesNow(session.expiresAt) || queued.has(payer)) return;
      queued.add(payer);
      let started = false;
      // Begun after the answer is written: on SQLite the settlement's first steps run synchronously.
      const job = new Promise<void>((resolve) => setImmediate(resolve))
        .then(() =>
          options.withPayerLock(payer, async () => {
            started = true;
            queued.delete(payer);
            const record = await findSession(options.store, session.id);
            if (record) await settleSessionDebt(options, record);
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
