import { once } from 'node:events';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Hex, parseTransaction, recoverTransactionAddress } from 'viem';

type Mode = 'pass' | 'down' | 'stall';

/**
 * A JSON-RPC proxy in front of a chain node that a test can take down (calls reset, as a dead node
 * or a broken network) or stall (calls unanswered, as an overloaded node), from the next call of
 * a given method on: the failure lands at the exact step of a settlement the test aims at. It can
 * also slow every call down (a loaded node or a long way to it), each still answered.
 */
export interface RpcProxy {
  url: string;
  /** Calls go through (again), without delay; stalled calls go on. */
  pass(): void;
  /**
   * Every call from now on reaches the node `ms` late (and is answered then), until `pass`; stalled
   * calls go on. A `down` or a stall meanwhile still applies to a call once its delay is over.
   */
  slow(ms: number): void;
  /** Every call is reset, stalled ones too, until `pass`. */
  down(): void;
  /** Every call waits unanswered until `pass` (then it goes through) or `down`. */
  stall(): void;
  /** From the next call of `method` on, that one included, every call is reset. Resolves then. */
  downFrom(method: string): Promise<void>;
  /** From the next call of `method` on, that one included, every call waits. Resolves then. */
  stallFrom(method: string): Promise<void>;
  /** The next call of `method` is answered; every call after it waits. Resolves once it was answered. */
  stallAfter(method: string): Promise<void>;
  /**
   * From now on the node takes a replacement (same sender and nonce as a transaction it took) only
   * with both fees raised by `percent` (geth's `--txpool.pricebump`; its default is 10); else the
   * broadcast is refused as `replacement transaction underpriced`.
   */
  requirePriceBump(percent: number): void;
  /**
   * The next call of `method` goes through, but its caller is answered with a JSON-RPC error
   * saying `message` (as when a proxy retries a call the node had taken, and the node refuses the
   * repeat). Resolves once it was answered.
   */
  misreportNext(method: string, message: string): Promise<void>;
  /**
   * The next `times` calls of `method` are answered as a node a block behind would answer them: a
   * `null` result (no such transaction, no receipt yet), without asking the node. Resolves once the
   * last of them was answered.
   */
  lagNext(method: string, times?: number): Promise<void>;
  /** The JSON-RPC methods called so far, in order. */
  methods: string[];
  close(): Promise<void>;
}

interface Trigger {
  method: string;
  mode: Mode;
  when: 'before' | 'after';
  fired: () => void;
}

/** A transaction's sender and nonce, and the fees of the one the node took under them. */
type PooledFees = Map<string, { maxFeePerGas: bigint; maxPriorityFeePerGas: bigint }>;

export async function startRpcProxy(targetUrl: string): Promise<RpcProxy> {
  let mode: Mode = 'pass';
  /** What each call waits before it goes on (`slow`). */
  let delayMs = 0;
  let priceBump: number | undefined;
  const misreports = new Map<string, { message: string; done: () => void }>();
  const lags = new Map<string, { left: number; done: () => void }>();
  const pooled: PooledFees = new Map();
  const methods: string[] = [];
  const triggers: Trigger[] = [];
  let wake: Array<() => void> = [];

  const setMode = (next: Mode) => {
    mode = next;
    for (const resume of wake.splice(0)) resume();
  };
  const fire = (method: string, when: Trigger['when']) => {
    const index = triggers.findIndex((trigger) => trigger.method === method && trigger.when === when);
    if (index < 0) return;
    const [trigger] = triggers.splice(index, 1);
    if (!trigger) return;
    setMode(trigger.mode);
    trigger.fired();
  };

  const server = createServer(async (req, res) => {
    const body = await readBody(req);
    const called = methodsOf(body);
    methods.push(...called);
    for (const method of called) fire(method, 'before');
    if (delayMs > 0) await sleep(delayMs);
    while (mode === 'stall') await new Promise<void>((resume) => wake.push(resume));
    if (mode === 'down') {
      req.socket.resetAndDestroy();
      return;
    }
    const lag = called.length === 1 ? lags.get(called[0] as string) : undefined;
    if (lag) {
      if (--lag.left === 0) lags.delete(called[0] as string);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({ jsonrpc: '2.0', id: (JSON.parse(body) as { id?: unknown }).id, result: null }),
      );
      if (lag.left === 0) lag.done();
      return;
    }
    const sent = priceBump === undefined ? undefined : await sentTransaction(body);
    if (sent) {
      const earlier = pooled.get(sent.key);
      const bumped = (fee: bigint, before: bigint) => fee * 100n >= before * BigInt(100 + (priceBump ?? 0));
      if (
        earlier &&
        !(
          bumped(sent.fees.maxFeePerGas, earlier.maxFeePerGas) &&
          bumped(sent.fees.maxPriorityFeePerGas, earlier.maxPriorityFeePerGas)
        )
      ) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            jsonrpc: '2.0',
            id: sent.id,
            error: { code: -32000, message: 'replacement transaction underpriced' },
          }),
        );
        return;
      }
    }
    let answer: Response;
    try {
      answer = await fetch(targetUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      });
    } catch {
      req.socket.resetAndDestroy();
      return;
    }
    const text = await answer.text();
    if (sent && !text.includes('"error"')) pooled.set(sent.key, sent.fees);
    const misreport = called.length === 1 ? misreports.get(called[0] as string) : undefined;
    if (misreport) {
      misreports.delete(called[0] as string);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          jsonrpc: '2.0',
          id: (JSON.parse(body) as { id?: unknown }).id,
          error: { code: -32000, message: misreport.message },
        }),
      );
      misreport.done();
      return;
    }
    res.writeHead(answer.status, { 'content-type': 'application/json' });
    res.end(text);
    for (const method of called) fire(method, 'after');
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');

  const arm = (method: string, next: Mode, when: Trigger['when']) =>
    new Promise<void>((fired) => triggers.push({ method, mode: next, when, fired }));

  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    pass: () => {
      delayMs = 0;
      setMode('pass');
    },
    slow: (ms) => {
      delayMs = ms;
      setMode('pass');
    },
    down: () => setMode('down'),
    stall: () => setMode('stall'),
    downFrom: (method) => arm(method, 'down', 'before'),
    stallFrom: (method) => arm(method, 'stall', 'before'),
    stallAfter: (method) => arm(method, 'stall', 'after'),
    requirePriceBump: (percent) => {
      priceBump = percent;
    },
    misreportNext: (method, message) =>
      new Promise<void>((done) => misreports.set(method, { message, done })),
    lagNext: (method, times = 1) => new Promise<void>((done) => lags.set(method, { left: times, done })),
    methods,
    async close() {
      setMode('down');
      wake = [];
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}

function methodsOf(body: string): string[] {
  try {
    const parsed = JSON.parse(body) as { method?: string } | Array<{ method?: string }>;
    return (Array.isArray(parsed) ? parsed : [parsed]).map((call) => String(call.method));
  } catch {
    return [];
  }
}

/** The transaction of a single `eth_sendRawTransaction` call: its sender and nonce, and its fees. */
async function sentTransaction(body: string) {
  let call: { id?: unknown; method?: string; params?: unknown[] };
  try {
    call = JSON.parse(body);
  } catch {
    return undefined;
  }
  if (call.method !== 'eth_sendRawTransaction') return undefined;
  const raw = call.params?.[0] as Hex;
  const { nonce, maxFeePerGas = 0n, maxPriorityFeePerGas = 0n } = parseTransaction(raw);
  const sender = await recoverTransactionAddress({ serializedTransaction: raw as never });
  return { id: call.id, key: `${sender}:${nonce}`, fees: { maxFeePerGas, maxPriorityFeePerGas } };
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
