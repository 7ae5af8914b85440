import { Worker } from 'node:worker_threads';
import type { UsageWorkerOptions, UsageWorkerReply, UsageWorkerRequest } from './sqlite-usage-worker.js';
import { type EarlierUsageRows, type NewUsageRow, USAGE_COLUMNS } from './usage-records.js';

/** Usage records written by a worker thread (sqlite-usage-worker.ts) on its own connection. */
export interface UsageWriter {
  write(rows: readonly NewUsageRow[]): Promise<EarlierUsageRows>;
  /** Waits for the writes under way, then stops the worker. */
  close(): Promise<void>;
}

/** The code of a write whose worker stopped before answering: the write may be retried. */
export const USAGE_WRITER_LOST = 'USAGE_WRITER_LOST';

interface Pending {
  resolve(earlier: EarlierUsageRows): void;
  reject(error: Error): void;
}

/**
 * The worker's entry: the compiled module, or from the sources (tsx, vitest) the TypeScript one
 * imported through tsx (a loader given to a worker's `--import` is not applied on Node 20).
 */
function workerEntry(): [string | URL, { eval?: boolean }] {
  if (!import.meta.url.endsWith('.ts')) return [new URL('./sqlite-usage-worker.js', import.meta.url), {}];
  const entry = JSON.stringify(new URL('./sqlite-usage-worker.ts', import.meta.url).href);
  const tsx = JSON.stringify(import.meta.resolve('tsx/esm/api'));
  return [`import(${tsx}).then(({ tsImport }) => tsImport(${entry}, ${entry}))`, { eval: true }];
}

export function sqliteUsageWriter(options: UsageWorkerOptions): UsageWriter {
  let worker: Worker | undefined;
  let nextId = 0;
  const pending = new Map<number, Pending>();
  const drainWaiters: Array<() => void> = [];
  let closed = false;

  const settle = (id: number, outcome: (waiter: Pending) => void) => {
    const waiter = pending.get(id);
    if (!waiter) return;
    pending.delete(id);
    outcome(waiter);
    if (pending.size === 0) {
      // An idle worker must not keep the process alive; one with writes under way must.
      worker?.unref();
      for (const waiter of drainWaiters.splice(0)) waiter();
    }
  };
  // A worker that failed or stopped answers nothing more: its writes fail as unavailable (they may
  // have committed; a retry of the same request id returns the stored record) and the next write
  // starts another.
  const lose = (lost: Worker, cause: Error) => {
    if (worker !== lost) return;
    worker = undefined;
    const error = Object.assign(new Error(`the usage writer stopped: ${cause.message}`, { cause }), {
      code: USAGE_WRITER_LOST,
    });
    for (const id of [...pending.keys()]) settle(id, (waiter) => waiter.reject(error));
  };
  const start = () => {
    const [entry, how] = workerEntry();
    const started = new Worker(entry, { ...how, workerData: options });
    started.on('message', (reply: UsageWorkerReply) =>
      settle(reply.id, (waiter) => {
        if ('error' in reply)
          waiter.reject(Object.assign(new Error(reply.error.message), { code: reply.error.code }));
        else waiter.resolve(new Map(reply.earlier.map((row) => [row.request_id, row])));
      }),
    );
    started.on('error', (error) => lose(started, error));
    started.on('exit', (code) => lose(started, new Error(`usage writer stopped (exit code ${code})`)));
    return started;
  };

  return {
    write(rows) {
      if (closed) return Promise.reject(new Error('the store is closed'));
      worker ??= start();
      const id = nextId++;
      const request: UsageWorkerRequest = { id, rows: rows.map(valuesOf) };
      return new Promise((resolve, reject) => {
        pending.set(id, { resolve, reject });
        worker?.ref();
        worker?.postMessage(request);
      });
    },
    async close() {
      closed = true;
      if (pending.size > 0) await new Promise<void>((resolve) => drainWaiters.push(resolve));
      const stopping = worker;
      worker = undefined;
      await stopping?.terminate();
    },
  };
}

const valuesOf = (row: NewUsageRow): unknown[] => USAGE_COLUMNS.map((column) => row[column] ?? null);
