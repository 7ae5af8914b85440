import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

/** What the gateway sent to a simulator. Times are `performance.now()` of this process. */
export interface LoggedRequest {
  method: string;
  /** Path with its query string. */
  path: string;
  headers: IncomingHttpHeaders;
  /** The JSON body, parsed (the raw text when it is not JSON). */
  // biome-ignore lint/suspicious/noExplicitAny: tests read the provider's wire format freely
  body: any;
  receivedAt: number;
  /** When the answer was fully written. */
  endedAt?: number;
  /** When the gateway closed the connection before the answer ended (a cancelled upstream call). */
  abortedAt?: number;
}

export interface ScriptedToolCall {
  name: string;
  arguments: Record<string, unknown>;
  /** The provider's call id; generated when absent (Gemini sends none). */
  id?: string;
}

/**
 * One scripted answer, always streamed (the gateway streams every call); `stop` and `usage` are in
 * the provider's own terms.
 */
export interface ScriptedReply<Stop extends string, Usage> {
  /** The answer text; an array is streamed piece by piece. */
  text?: string | string[];
  thinking?: string;
  toolCalls?: ScriptedToolCall[];
  stop?: Stop;
  /** Provider wire usage; fields left out are computed from the texts. */
  usage?: Usage;
  /**
   * Milliseconds before each event carrying a piece of the answer (text, thinking, a tool call), so
   * an answer of one piece takes that long; also before a scripted error event or reset. None by default.
   */
  delayMs?: number;
  /** Streams: after this many events, the provider's in-stream error event, then the end. */
  failAfterEvents?: number;
  /** Streams: after this many events, silence with the connection held open. */
  hangAfterEvents?: number;
  /** Streams: after this many events, the response ends cleanly but early (a truncated stream). */
  endAfterEvents?: number;
  /** Streams: after this many events, the connection is reset (TCP RST), as a crashed provider's would be. */
  resetAfterEvents?: number;
  /** Streams: the connection is reset just before the event stating the final usage. */
  resetBeforeUsage?: boolean;
}

/** One event of a stream, as written. */
export interface Frame {
  text: string;
  /** Carries a piece of the answer: `delayMs` is waited before it. */
  paced?: boolean;
  /** States the answer's final usage (`resetBeforeUsage` cuts the stream before it). */
  finalUsage?: boolean;
}

export interface ScriptedHttpError {
  status: number;
  message?: string;
  /** The provider's error type or status name; derived from `status` when absent. */
  type?: string;
  /**
   * How long the provider asks callers to wait, said its own way: Anthropic and OpenAI send a
   * `retry-after` header (seconds), Gemini a `google.rpc.RetryInfo` detail in its body.
   */
  retryAfterSeconds?: number;
  /** OpenAI's `error.code` (`context_length_exceeded`, `rate_limit_exceeded`, `insufficient_quota`). */
  code?: string;
}

/** The `retry-after` header of an error that states one. */
export function retryAfterHeader(error: ScriptedHttpError): Record<string, string> {
  return error.retryAfterSeconds === undefined ? {} : { 'retry-after': String(error.retryAfterSeconds) };
}

/** A scripted step: an answer, an HTTP error with the provider's error body, or no answer at all. */
export type ScriptStep<Reply> = Reply | { httpError: ScriptedHttpError } | { hang: true };

export interface Simulator<Step> {
  url: string;
  log: LoggedRequest[];
  /** Queues steps; each model call takes the next one, and gets the default answer once none is left. */
  script(...steps: Step[]): void;
  close(): Promise<void>;
}

/** One request being answered. */
export class Exchange {
  constructor(
    readonly request: LoggedRequest,
    private readonly res: ServerResponse,
  ) {}

  /** The gateway closed the connection. */
  get gone(): boolean {
    return this.res.destroyed;
  }

  json(status: number, body: unknown, headers: Record<string, string> = {}): void {
    this.res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers });
    this.res.end(JSON.stringify(body));
  }

  openEvents(): void {
    this.res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
    });
    this.res.flushHeaders();
  }

  /** Writes raw stream text after `delayMs`; false once the gateway is gone. */
  async write(text: string, delayMs = 0): Promise<boolean> {
    if (delayMs > 0) await sleep(delayMs);
    if (this.gone) return false;
    if (!this.res.write(text)) await Promise.race([once(this.res, 'drain'), once(this.res, 'close')]);
    return !this.gone;
  }

  end(): void {
    if (!this.gone) this.res.end();
  }

  /**
   * Resets the connection mid-answer, after `delayMs`: a reset discards what the peer has not read
   * yet, so without a pause the frames just written would be lost with it.
   */
  async reset(delayMs = 0): Promise<void> {
    if (delayMs > 0) await sleep(delayMs);
    this.res.socket?.resetAndDestroy();
  }

  /** Answers nothing until the gateway gives up (or the simulator closes). */
  async hang(): Promise<void> {
    if (!this.gone) await once(this.res, 'close');
  }
}

/** How a provider words an HTTP error: its error body, and the headers it sends with a scripted one. */
export interface ErrorWording {
  body(error: ScriptedHttpError): unknown;
  headers?(error: ScriptedHttpError): Record<string, string>;
}

/**
 * What every provider does before answering: answers its refusal of the request, else takes the next
 * scripted step (`defaultReply` once none is left) and answers a scripted hang or HTTP error. Returns
 * the reply left to send, or undefined once answered. A refused request takes no step.
 */
export async function replyToSend<Reply extends object>(
  exchange: Exchange,
  refusal: ScriptedHttpError | undefined,
  next: () => ScriptStep<Reply> | undefined,
  defaultReply: () => Reply,
  errors: ErrorWording,
): Promise<Reply | undefined> {
  if (refusal) {
    exchange.json(refusal.status, errors.body(refusal));
    return undefined;
  }
  const step = next() ?? defaultReply();
  if ('hang' in step) {
    await exchange.hang();
    return undefined;
  }
  if ('httpError' in step) {
    exchange.json(step.httpError.status, errors.body(step.httpError), errors.headers?.(step.httpError));
    return undefined;
  }
  return step;
}

/** The routes of one provider; `next` takes the next scripted step (undefined: answer by default). */
export type SimulatorHandler<Step> = (exchange: Exchange, next: () => Step | undefined) => Promise<void>;

export interface SimulatorOptions {
  /** Keep every request in `log` (default). Long runs (the local stack, benchmarks) turn it off. */
  log?: boolean;
}

/** A real HTTP server on 127.0.0.1 with a free port, logging each request before answering it. */
export async function startSimulator<Step>(
  handler: SimulatorHandler<Step>,
  options: SimulatorOptions = {},
): Promise<Simulator<Step>> {
  const log: LoggedRequest[] = [];
  const queue: Step[] = [];
  const server = createServer(async (req, res) => {
    const receivedAt = performance.now();
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    let body: unknown = text;
    try {
      body = text === '' ? undefined : JSON.parse(text);
    } catch {
      // kept as text: the simulator answers it as the provider would answer invalid JSON
    }
    const entry: LoggedRequest = {
      method: req.method ?? 'GET',
      path: req.url ?? '/',
      headers: req.headers,
      body,
      receivedAt,
    };
    if (options.log !== false) log.push(entry);
    res.on('close', () => {
      if (res.writableFinished) entry.endedAt = performance.now();
      else entry.abortedAt = performance.now();
    });
    try {
      await handler(new Exchange(entry, res), () => queue.shift());
    } catch (error) {
      if (!res.headersSent) {
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.end(`simulator failed: ${(error as Error).message}`);
      } else res.destroy();
    }
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    log,
    script: (...steps) => queue.push(...steps),
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}

/**
 * The default answer when no step is scripted: an echo of the last user text, one token per
 * word, cut at `maxTokens` (then the finish is a length stop).
 */
export function echoReply(
  lastUserText: string,
  maxTokens: number | undefined,
): { pieces: string[]; truncated: boolean } {
  const words = ['echo:', ...wordsOf(lastUserText)];
  const kept = maxTokens === undefined ? words : words.slice(0, maxTokens);
  return {
    pieces: kept.map((word, i) => (i === 0 ? word : ` ${word}`)),
    truncated: kept.length < words.length,
  };
}

/** Tokens as the simulators count them: one per whitespace-separated word. */
export function tokenCount(text: string): number {
  return wordsOf(text).length;
}

function wordsOf(text: string): string[] {
  return text.split(/\s+/).filter((word) => word !== '');
}

/** A PDF's pages (its page objects), at least one. */
export function pdfPages(base64: string): number {
  return Math.max(
    1,
    Buffer.from(base64, 'base64')
      .toString('latin1')
      .match(/\/Type\s*\/Page(?![a-z])/g)?.length ?? 0,
  );
}

export function piecesOf(text: string | string[] | undefined): string[] {
  if (text === undefined) return [];
  return Array.isArray(text) ? text : [text];
}

export function randomId(prefix: string): string {
  return `${prefix}${crypto.randomUUID().replaceAll('-', '').slice(0, 24)}`;
}

/**
 * Writes stream frames as scripted: those of the answer each after `delayMs`, the error frame
 * instead of frame number `failAfterEvents`, silence from frame `hangAfterEvents` on, the end at
 * `endAfterEvents`, or a connection reset at `resetAfterEvents` or before the final usage.
 */
export async function sendFrames(
  exchange: Exchange,
  frames: Frame[],
  reply: Pick<
    ScriptedReply<string, unknown>,
    | 'delayMs'
    | 'failAfterEvents'
    | 'hangAfterEvents'
    | 'endAfterEvents'
    | 'resetAfterEvents'
    | 'resetBeforeUsage'
  >,
  errorFrame: string,
): Promise<void> {
  exchange.openEvents();
  for (const [i, frame] of frames.entries()) {
    if (reply.failAfterEvents === i) {
      await exchange.write(errorFrame, reply.delayMs);
      return exchange.end();
    }
    if (reply.hangAfterEvents === i) return exchange.hang();
    if (reply.resetAfterEvents === i || (reply.resetBeforeUsage && frame.finalUsage))
      return exchange.reset(reply.delayMs);
    if (reply.endAfterEvents === i) break;
    if (!(await exchange.write(frame.text, frame.paced ? reply.delayMs : 0))) return;
  }
  exchange.end();
}
