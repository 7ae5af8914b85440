import { once } from 'node:events';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';

type Mode = 'pass' | 'down' | 'stall';

/**
 * A JSON-RPC proxy in front of a chain node that a test can take down (calls reset, as a dead node
 * or a broken network) or stall (calls unanswered, as an overloaded node), from the next call of
 * a given method on: the failure lands at the exact step of a settlement the test aims at.
 */
export interface RpcProxy {
  url: string;
  /** Calls go through (again); stalled calls go on. */
  pass(): void;
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

export async function startRpcProxy(targetUrl: string): Promise<RpcProxy> {
  let mode: Mode = 'pass';
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
    while (mode === 'stall') await new Promise<void>((resume) => wake.push(resume));
    if (mode === 'down') {
      req.socket.resetAndDestroy();
      return;
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
    pass: () => setMode('pass'),
    down: () => setMode('down'),
    stall: () => setMode('stall'),
    downFrom: (method) => arm(method, 'down', 'before'),
    stallFrom: (method) => arm(method, 'stall', 'before'),
    stallAfter: (method) => arm(method, 'stall', 'after'),
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

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
