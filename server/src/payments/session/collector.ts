import type { Address } from 'viem';
import { type CollectionDue, collectableDebtors, settlementsOf } from '../../billing/settlements.js';
import type { DependencyCheck } from '../../health.js';
import type { Leadership } from '../../store/leadership.js';
import type { PayerLock } from '../../store/payer-lock.js';
import { pruneUnpaidSessions } from '../../store/sessions.js';
import { shownReason } from '../chain/index.js';
import { finishUnfinishedSettlements, type RefusalReason, SettlementRefusedError } from '../outbox/index.js';
import { finishUnfinishedX402Settlements } from '../x402/index.js';
import { unexpiredSessions } from './session-records.js';
import { type SessionSettlementDeps, settleSessionDebt } from './session-settlement.js';

/** How long a session stays that was never used (no session-rail record of its payer since it was authorized). */
export const UNUSED_SESSION_LIFETIME_MS = 7 * 86_400_000;
/** Sessions pruned per run at most: a run's work stays bounded. */
const PRUNED_PER_RUN = 500;

/** Delegations tried for one payer in one attempt, newest first. */
const SESSIONS_TRIED = 5;
/**
 * Payers whose debts the collector settles at once: their settlements go out in shared
 * transactions; each holds a payer lock (a connection of PostgreSQL's lock pool, 16 by default).
 */
const COLLECTED_TOGETHER = 8;
/** Refusals of a delegation itself, which another of the payer's delegations may not share. */
const DELEGATION_REFUSALS = new Set<RefusalReason>([
  'cap_reached',
  'expired',
  'revoked',
  'invalid_delegation',
]);

export interface CollectorOptions extends SessionSettlementDeps {
  withPayerLock: PayerLock;
  /**
   * Debts whose newest record is older than this are collected; so are, at once, those whose
   * sessions all end (expire, or were revoked) before that wait and a collection would be over.
   */
  idleMs: number;
  /** Pause between two runs. */
  intervalMs: number;
  /** First retry delay after a payer's collection failed; doubles per failure up to `maxBackoffMs`. */
  backoffMs?: number;
  maxBackoffMs?: number;
  /** Payers due attempted per run at most (100); the next run goes on after the last one reached. */
  batchSize?: number;
  /** Runs only while this instance holds it: one collector among the instances sharing the database. */
  leadership?: Leadership;
  log: { warn(details: object, message: string): void; error(details: object, message: string): void };
}

/** What /health shows of the collector. */
export interface CollectorState {
  running: boolean;
  /** False while another instance holds the collector's leadership (this one stands by). */
  leading: boolean;
  lastRunAt: string | null;
  lastRunError: string | null;
  /** Payers settled by the collector since start. */
  collected: number;
  /** Payers whose last collection failed, with when the next attempt is due. */
  failing: Array<{ payer: Address; failures: number; lastError: string; nextAttemptAt: string }>;
}

export interface CollectorRun {
  collected: Address[];
  failed: Address[];
  reconciled: number;
  /** Sessions deleted that never paid and are of no more use (see pruneUnpaidSessions). */
  pruned: number;
}

export interface Collector {
  /** Runs now and then every `intervalMs` until `stop`. */
  start(): void;
  /** Stops the loop and waits for a run in progress. */
  stop(): Promise<void>;
  runOnce(now?: Date): Promise<CollectorRun>;
  state(): CollectorState;
  healthCheck(): DependencyCheck;
}

/**
 * How near its end a session's debts are due at once. A session is served up to its delegation's
 * expiry, and the delegation pays only until then: within this time of it, the idle wait, the
 * collector's next run and a settlement's longest wait for its receipt would not all fit.
 */
export function sessionsEndingSoonMs(
  options: Pick<CollectorOptions, 'idleMs' | 'intervalMs' | 'receiptTimeoutMs'>,
): number {
  return options.idleMs + options.intervalMs + options.receiptTimeoutMs;
}

interface Failure {
  failures: number;
  lastError: string;
  nextAttemptAt: number;
}

/**
 * Settles, in the background, the debts of session payers who stopped sending requests, or whose
 * sessions end before an idle wait would (so their last request is paid too), finishes settlements
 * of either rail left in flight, and deletes sessions that never paid and are of no more use. Each
 * payer is settled under its lock; a failing payer is retried with exponential backoff.
 */
export function createCollector(options: CollectorOptions): Collector {
  const backoffMs = options.backoffMs ?? options.intervalMs;
  const maxBackoffMs = options.maxBackoffMs ?? 64 * backoffMs;
  const batchSize = options.batchSize ?? 100;
  // A revoked session ends now for requests, while its delegation can still pay on chain until it expires.
  const due: CollectionDue = {
    idleMs: options.idleMs,
    sessionsEndingWithinMs: sessionsEndingSoonMs(options),
  };
  const failures = new Map<Address, Failure>();
  // The last payer due reached: payers that can never be collected (expired session, refused
  // payment) would otherwise fill every batch and keep the others from ever being reached.
  let resumeAfter: Address | undefined;
  // The payers due met in the current pass over the list: at its end, payers that failed and
  // were not met owe nothing due any more (they paid with a request) and leave the failure list.
  // A payer with a settlement in flight is left out of the payers due meanwhile, yet owes: it stays.
  let metThisPass = new Set<Address>();
  let collected = 0;
  let lastRunAt: Date | null = null;
  let lastRunError: string | null = null;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<unknown> | undefined;
  let stopped = true;
  let leading = options.leadership === undefined;

  const fail = (payer: Address, error: unknown, now: number) => {
    const failureCount = (failures.get(payer)?.failures ?? 0) + 1;
    const delay = Math.min(maxBackoffMs, backoffMs * 2 ** (failureCount - 1));
    const lastError = shownReason(error);
    failures.set(payer, { failures: failureCount, lastError, nextAttemptAt: now + delay });
    options.log.warn({ payer, failures: failureCount, err: error }, 'collector could not settle a debt');
  };

  const settlingNow = async (payer: Address) => {
    const [latest] = await settlementsOf(options.store, payer, { limit: 1 });
    return latest?.status === 'pending' || latest?.status === 'sent';
  };

  const backingOff = (payer: Address, now: Date) => (failures.get(payer)?.nextAttemptAt ?? 0) > now.getTime();

  /**
   * The newest unexpired delegation pays, or, when the chain refuses it for its own sake (its cap
   * used up, expired or disabled on chain, invalid), the next newest: the payer may have signed a
   * smaller one since. A refusal of the account itself (its balance) ends the attempt.
   */
  const settleThroughAnySession = async (payer: Address, now: Date) => {
    const sessions = await unexpiredSessions(options.store, payer, { now, limit: SESSIONS_TRIED });
    if (sessions.length === 0) throw new Error('no unexpired session delegation to collect with');
    for (const [tried, session] of sessions.entries()) {
      try {
        return await settleSessionDebt(options, session, { weighDeploymentCost: true });
      } catch (error) {
        const last = tried === sessions.length - 1;
        if (last || !(error instanceof SettlementRefusedError && DELEGATION_REFUSALS.has(error.reason)))
          throw error;
      }
    }
  };

  const collect = async (payer: Address, now: Date, run: CollectorRun) => {
    try {
      await options.withPayerLock(payer, () => settleThroughAnySession(payer, now));
      failures.delete(payer);
      collected++;
      run.collected.push(payer);
    } catch (error) {
      fail(payer, error, now.getTime());
      run.failed.push(payer);
    }
  };

  /**
   * Walks the payers due page by page from where the last run stopped until `batchSize` of them
   * were attempted: a run's work stays bounded, and payers backing off are passed over at the cost
   * of reading them. At the end of the list, the next run starts again from its beginning.
   */
  const collectDueDebts = async (now: Date, run: CollectorRun) => {
    let attempted = 0;
    // Several payers at once, so that their settlements share transactions (the batcher's).
    let together: Address[] = [];
    const collectTogether = async () => {
      await Promise.all(together.map((payer) => collect(payer, now, run)));
      together = [];
    };
    while (attempted < batchSize) {
      const page = await collectableDebtors(options.store, due, {
        now,
        rail: 'session',
        after: resumeAfter,
        limit: batchSize,
      });
      for (const payer of page) {
        if (attempted === batchSize) return collectTogether();
        resumeAfter = payer;
        metThisPass.add(payer);
        if (backingOff(payer, now)) continue;
        attempted++;
        together.push(payer);
        if (together.length === COLLECTED_TOGETHER) await collectTogether();
      }
      await collectTogether();
      if (page.length < batchSize) {
        resumeAfter = undefined;
        const met = metThisPass;
        metThisPass = new Set();
        for (const payer of [...failures.keys()])
          if (!met.has(payer) && !(await settlingNow(payer))) failures.delete(payer);
        return;
      }
    }
  };

  const runOnce = async (now = new Date()): Promise<CollectorRun> => {
    const run: CollectorRun = { collected: [], failed: [], reconciled: 0, pruned: 0 };
    try {
      leading = (await options.leadership?.acquire()) ?? true;
      if (!leading) {
        lastRunError = null;
        lastRunAt = now;
        return run;
      }
      const olderThan = new Date(now.getTime() - options.receiptTimeoutMs);
      // Each step runs even when one before it failed: a settlement that cannot be finished (a node
      // that fails on it) must not keep every debt due from being collected.
      const stepErrors: unknown[] = [];
      const step = (work: () => Promise<unknown>) => work().catch((error: unknown) => stepErrors.push(error));
      await step(async () => {
        run.reconciled = (
          await finishUnfinishedSettlements(options, options.withPayerLock, { olderThan })
        ).length;
      });
      // An x402 payer who never comes back would leave its settlement unfinished until a restart.
      await step(() => finishUnfinishedX402Settlements(options, options.withPayerLock, { olderThan }));
      await step(() => collectDueDebts(now, run));
      await step(async () => {
        run.pruned = await pruneUnpaidSessions(options.store, {
          now: now.getTime(),
          unusedSince: now.getTime() - UNUSED_SESSION_LIFETIME_MS,
          limit: PRUNED_PER_RUN,
        });
      });
      if (stepErrors.length > 0) throw stepErrors[0];
      lastRunError = null;
    } catch (error) {
      lastRunError = shownReason(error);
      options.log.error({ err: error }, 'collector run failed');
    }
    lastRunAt = now;
    return run;
  };

  const loop = () => {
    running = runOnce().finally(() => {
      if (!stopped) timer = setTimeout(loop, options.intervalMs);
    });
  };

  const state = (): CollectorState => ({
    running: !stopped,
    leading,
    lastRunAt: lastRunAt?.toISOString() ?? null,
    lastRunError,
    collected,
    failing: [...failures].map(([payer, failure]) => ({
      payer,
      failures: failure.failures,
      lastError: failure.lastError,
      nextAttemptAt: new Date(failure.nextAttemptAt).toISOString(),
    })),
  });

  return {
    start() {
      if (!stopped) return;
      stopped = false;
      loop();
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
      await options.leadership?.release();
      leading = options.leadership === undefined;
    },
    runOnce,
    state,
    healthCheck: () => ({
      name: 'collector',
      // Idle debts wait; requests are still settled one by one.
      critical: false,
      async check() {
        const current = { ...state() };
        if (!current.running) return { status: 'down', detail: 'not running', state: current };
        if (!current.leading)
          return { status: 'up', detail: 'standing by: another instance collects', state: current };
        if (current.lastRunError)
          return { status: 'down', detail: `last run failed: ${current.lastRunError}`, state: current };
        const detail = `${current.collected} idle debts collected; ${current.failing.length} payers failing`;
        return { status: 'up', detail, state: current };
      },
    }),
  };
}
