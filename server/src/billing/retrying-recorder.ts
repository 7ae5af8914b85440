import { setTimeout as sleep } from 'node:timers/promises';
import type { UsageRecorder } from '../services/chat-contracts.js';

export interface RetryOptions {
  /** How long a write keeps being retried. */
  retryForMs: number;
  /** Whether a failure may pass (the database briefly away), as opposed to a write that is wrong. */
  transient(error: unknown): boolean;
  /** First pause between attempts; doubles up to a second. */
  backoffMs?: number;
}

/**
 * Retries a usage write the database could not take (a restart, a failover, a network blip): the
 * provider has served the request, so a brief outage must not drop what it cost. Writing a record
 * again is safe: records are keyed by the request id.
 */
export function retryingRecorder(recorder: UsageRecorder, options: RetryOptions): UsageRecorder {
  return {
    async record(entry) {
      const deadline = Date.now() + options.retryForMs;
      for (let pause = options.backoffMs ?? 100; ; pause = Math.min(2 * pause, 1000)) {
        try {
          return await recorder.record(entry);
        } catch (error) {
          if (!options.transient(error) || Date.now() + pause > deadline) throw error;
          await sleep(pause);
        }
      }
    },
  };
}
