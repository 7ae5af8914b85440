import type { StatedCost, UsageRecorder } from '../services/chat-contracts.js';
import { isStoreUnavailable, type Store } from '../store/database.js';
import { type NewUsageRecord, recordUsages, type UsageConflictError, type UsageRecord } from './ledger.js';
import { formatUsd } from './money.js';
import { type CostBreakdown, costOf, pricesFor } from './pricing.js';

/**
 * Prices each request at its catalog model's prices (its long-prompt tier's for a long prompt) plus the
 * commission, and writes its usage record.
 * Records of requests ending at the same time are written in one transaction (group commit): each
 * answer still waits for its own record to be committed, but they share one commit.
 */
export function createUsageRecorder(store: Store, commissionBps: number): UsageRecorder {
  const write = groupCommit((entries: NewUsageRecord[]) => recordUsages(store, entries));
  return {
    async record(entry) {
      const cost = costOf(entry.usage, pricesFor(entry.model.pricing, entry.usage), commissionBps);
      if (cost.totalPicoUsd > MAX_RECORDED_PICO_USD)
        throw new RangeError(
          `a cost of ${cost.totalPicoUsd} pico-USD is more than the ledger's integers hold`,
        );
      const record = await write({
        requestId: entry.requestId,
        payer: entry.payer,
        rail: entry.rail,
        model: entry.model.id,
        usage: entry.usage,
        cost,
      });
      return statedCost(record.cost);
    },
  };
}

/** The ledger's amounts are 64-bit integers on both databases. */
const MAX_RECORDED_PICO_USD = 2n ** 63n - 1n;

// Bounded so that one transaction stays well under the databases' bound-parameter limits.
const MAX_BATCH = 256;

interface QueuedRecord {
  entry: NewUsageRecord;
  resolve(record: UsageRecord): void;
  reject(error: unknown): void;
}

/**
 * Queues records and writes whatever is queued in one batch, then the next: the first waits for
 * the current event-loop turn to end (so that answers arriving together share a commit), later
 * ones for the batch in progress. Nothing is acknowledged before its batch is committed.
 */
function groupCommit(
  writeBatch: (entries: NewUsageRecord[]) => Promise<Array<UsageRecord | UsageConflictError>>,
): (entry: NewUsageRecord) => Promise<UsageRecord> {
  let queue: QueuedRecord[] = [];
  let flushing = false;
  const write = async (batch: QueuedRecord[]) => {
    try {
      const results = await writeBatch(batch.map((item) => item.entry));
      batch.forEach((item, i) => {
        const result = results[i];
        if (result instanceof Error || result === undefined) item.reject(result);
        else item.resolve(result);
      });
    } catch (error) {
      // A record the database refuses (one it finds wrong) must not take the others of its batch
      // with it: each is written alone. An outage fails them all (they are retried).
      if (batch.length > 1 && !isStoreUnavailable(error)) for (const item of batch) await write([item]);
      else for (const item of batch) item.reject(error);
    }
  };
  const flush = async () => {
    while (queue.length > 0) {
      const batch = queue.slice(0, MAX_BATCH);
      queue = queue.slice(MAX_BATCH);
      await write(batch);
    }
    flushing = false;
  };
  return (entry) =>
    new Promise<UsageRecord>((resolve, reject) => {
      queue.push({ entry, resolve, reject });
      if (flushing) return;
      flushing = true;
      setImmediate(() => void flush());
    });
}

/** The cost as a response states it: exact USD decimal strings and pico-USD integer strings. */
export function statedCost(cost: CostBreakdown): StatedCost {
  return {
    total: formatUsd(cost.totalPicoUsd),
    provider: formatUsd(cost.providerPicoUsd),
    commission: formatUsd(cost.commissionPicoUsd),
    totalPicoUsd: cost.totalPicoUsd.toString(),
    providerPicoUsd: cost.providerPicoUsd.toString(),
    commissionPicoUsd: cost.commissionPicoUsd.toString(),
  };
}
