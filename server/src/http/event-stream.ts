import { Readable } from 'node:stream';
import type { FastifyReply } from 'fastify';
import type { StreamDisconnect } from '../observability/metrics.js';
import type { EventSink } from '../services/chat-service.js';

/** Bytes of a stream a client may leave unread: past them it is disconnected (its answer is still billed). */
export const MAX_UNREAD_BYTES = 4 * 1024 * 1024;

/**
 * The event streams of one gateway and what they hold unread together. Past the budget streams are
 * disconnected, so that slow clients together cannot take the process's memory: those whose client
 * took nothing for IDLE_TICKS while some was waiting, largest first, until the rest fit; else the
 * largest of the others.
 */
export class StreamBuffers {
  /**
   * Each open stream at the last check: what its client had taken and what it held, and since which
   * tick it has held some and taken nothing.
   */
  private readonly open = new Map<BufferedStream, { taken: number; unread: number; quietSince: number }>();
  /**
   * Turns of the event loop at least TICK_MS apart, counted while streams are open. Idleness is counted
   * in them, not in time: after a pause (a long garbage collection, a starved CPU) a check can run
   * before the loop has seen the sockets drain, and every client would look idle.
   */
  private ticks = 0;
  private ticker: NodeJS.Timeout | undefined;
  private checkedAt = Number.NEGATIVE_INFINITY;
  private recheck: NodeJS.Timeout | undefined;

  constructor(readonly budgetBytes: number) {}

  add(stream: BufferedStream): void {
    // A timer runs at most once per turn of the loop, however late it is.
    this.ticker ??= setInterval(() => this.ticks++, TICK_MS).unref();
    this.open.set(stream, { taken: stream.taken(), unread: stream.unread(), quietSince: this.ticks });
  }

  delete(stream: BufferedStream): void {
    this.open.delete(stream);
    if (this.open.size > 0) return;
    clearInterval(this.ticker);
    this.ticker = undefined;
  }

  /** The streams open and what they hold unread (for the metrics). */
  snapshot(): { streams: number; unreadBytes: number } {
    let unreadBytes = 0;
    for (const stream of this.open.keys()) unreadBytes += stream.unread();
    return { streams: this.open.size, unreadBytes };
  }

  /**
   * Called when a stream's writes back up, with what that stream holds: sums what every stream
   * holds, at most once per ENFORCE_INTERVAL_MS (a backed-up stream calls it on each write, and the
   * sum is O(streams)); a call within it is made at its end, unless its stream alone holds more than
   * the budget (a fast upstream can fill megabytes in an interval).
   */
  enforce(holding = 0): void {
    const now = performance.now();
    const wait = this.checkedAt + ENFORCE_INTERVAL_MS - now;
    if (wait > 0 && holding <= this.budgetBytes) {
      this.recheck ??= setTimeout(() => {
        this.recheck = undefined;
        this.enforce();
      }, wait).unref();
      return;
    }
    this.checkedAt = now;
    let total = 0;
    const held: Array<{ stream: BufferedStream; unread: number; idle: boolean }> = [];
    for (const [stream, seen] of this.open) {
      const taken = stream.taken();
      const unread = stream.unread();
      // Quiet: it took nothing since the last check, and held some then (a silent answer, say a
      // model thinking, leaves nothing waiting: its client is not idle for it).
      const quiet = taken === seen.taken && seen.unread > 0;
      if (!quiet) seen.quietSince = this.ticks;
      seen.taken = taken;
      seen.unread = unread;
      total += unread;
      if (unread > 0)
        held.push({ stream, unread, idle: quiet && this.ticks - seen.quietSince >= IDLE_TICKS });
    }
    if (total <= this.budgetBytes) return;
    held.sort((a, b) => Number(b.idle) - Number(a.idle) || b.unread - a.unread);
    for (const { stream, unread, idle } of held) {
      stream.disconnect('buffer_budget', `streams hold more than ${this.budgetBytes} bytes unread together`);
      total -= unread;
      // Of clients still reading, one per check: what the others hold may be gone by the next.
      if (total <= this.budgetBytes || !idle) return;
    }
  }
}

/** How often the budget is summed at most: what streams write meanwhile is over it for that long. */
const ENFORCE_INTERVAL_MS = 20;
const TICK_MS = 10;
/** A client that took nothing of its stream for this many ticks (100 ms at least) is cut before one that is reading. */
const IDLE_TICKS = 10;

export interface BufferedStream {
  unread(): number;
  /** Bytes its client has taken so far. */
  taken(): number;
  disconnect(reason: StreamDisconnect, detail: string): void;
}

const DONE = 'data: [DONE]\n\n';
const SLICE_BYTES = 64 * 1024;
/** An SSE comment: clients skip it. */
const HEARTBEAT = ': keep-alive\n\n';

export interface EventStreamOptions {
  /** The longest a client may take nothing of its stream while some is waiting (UPSTREAM_TIMEOUT_MS). */
  stallMs: number;
  /** A comment goes out when nothing else did for this long, so that proxies keep an idle stream open (STREAM_HEARTBEAT_MS). */
  heartbeatMs: number;
  buffers: StreamBuffers;
  onDisconnect(reason: StreamDisconnect): void;
}

/**
 * Server-sent events to the socket. Writes never wait for the client: the provider's answer is read
 * at its own pace (its usage known, and billed, when it ends) and buffered for a slow client; one
 * that takes nothing of it for `stallMs` while some is waiting, or leaves too much of it unread, is
 * disconnected.
 */
export function openEventStream(
  reply: FastifyReply,
  options: EventStreamOptions,
  clientGone: AbortSignal,
): EventSink {
  // Pushed to, never written: what it holds is exactly what the response has not taken yet.
  const body = new Readable({ read() {} });
  reply
    .headers({
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      'x-accel-buffering': 'no',
    })
    .send(body);
  let ended = false;
  const open = () => !ended && !body.destroyed && !reply.raw.destroyed;
  let pushed = 0;
  // What the client has not taken: in the stream, and in the response's own buffers (its socket's
  // once it has one; while queued behind another response on its connection, its own).
  const unread = () => body.readableLength + reply.raw.writableLength;
  // What left for the kernel: the client's progress (less the few bytes of chunked framing).
  const taken = () => pushed - unread();
  const stream: BufferedStream = {
    unread,
    taken,
    disconnect(reason, detail) {
      if (reply.raw.destroyed) return;
      reply.log.warn(
        { unreadBytes: unread(), reason: detail },
        'the client left its stream unread: disconnected',
      );
      options.onDisconnect(reason);
      reply.raw.destroy();
      body.destroy();
    },
  };
  options.buffers.add(stream);
  let stalled: NodeJS.Timeout | undefined;
  const watch = () => {
    if (stalled || unread() === 0) return;
    const progress = taken();
    stalled = setTimeout(() => {
      stalled = undefined;
      // Queued behind an earlier response on its connection (pipelining), it cannot be read yet.
      if (!reply.raw.socket || taken() > progress) return watch();
      if (unread() > 0) stream.disconnect('stalled', `nothing read for ${options.stallMs} ms`);
    }, options.stallMs);
  };
  // While a model thinks (its thoughts are not relayed) an answer can be silent for minutes.
  const heartbeat = setTimeout(function beat() {
    if (!open()) return;
    if (unread() === 0) {
      pushed += HEARTBEAT.length;
      body.push(HEARTBEAT);
    }
    heartbeat.refresh();
  }, options.heartbeatMs);
  const release = () => {
    clearTimeout(stalled);
    clearTimeout(heartbeat);
    options.buffers.delete(stream);
    clientGone.removeEventListener('abort', onGone);
  };
  // A response queued behind another on its connection hears nothing of the socket closing (its
  // writes wait for a socket forever): the client's leaving releases it.
  const onGone = () => {
    body.destroy();
    release();
  };
  // A stream read to its end may still wait in the socket: it is released with its response.
  reply.raw.once('close', release);
  body.once('close', () => {
    if (!body.readableEnded) release();
  });
  if (clientGone.aborted) onGone();
  else clientGone.addEventListener('abort', onGone, { once: true });
  return {
    send(...events) {
      if (!open()) return;
      // Judged before the new events: one larger than a client may leave unread still reaches it.
      if (unread() > MAX_UNREAD_BYTES)
        return stream.disconnect('unread', `more than ${MAX_UNREAD_BYTES} bytes unread`);
      heartbeat.refresh();
      const text = events.map((json) => `data: ${json}\n\n`).join('');
      const bytes = Buffer.byteLength(text);
      pushed += bytes;
      if (bytes <= SLICE_BYTES) body.push(text);
      else {
        // A socket counts a write as taken only once all of it is: in slices, a client reading a
        // huge event shows its progress, and the socket holds one slice of it at a time.
        const buffer = Buffer.from(text);
        for (let at = 0; at < bytes; at += SLICE_BYTES) body.push(buffer.subarray(at, at + SLICE_BYTES));
      }
      const waiting = unread();
      if (waiting < body.readableHighWaterMark) return;
      options.buffers.enforce(waiting);
      watch();
    },
    close(done) {
      clearTimeout(heartbeat);
      if (!open()) return;
      ended = true;
      if (done) {
        pushed += DONE.length;
        body.push(DONE);
      }
      body.push(null);
      watch();
      // The response's own end follows the stream's: watched too, however little of it waits.
      body.once('end', watch);
    },
  };
}
