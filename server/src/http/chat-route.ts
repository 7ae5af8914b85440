import { PassThrough } from 'node:stream';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Catalog } from '../catalog/catalog.js';
import type { ChatRequest } from '../providers/openai-types.js';
import type { ChatInput, ChatService, EventSink } from '../services/chat-service.js';
import { resolveChatRequest } from './chat-request-rules.js';
import { chatRequestSchema } from './chat-request-schema.js';

export interface ChatRouteOptions {
  catalog: Catalog;
  defaultModel: string;
  chat: ChatService;
  /** The longest a client may leave its stream unread before it is disconnected (UPSTREAM_TIMEOUT_MS). */
  clientStallMs: number;
}

/** Bytes of a stream a client may leave unread: past them it is disconnected (its answer is still billed). */
const MAX_UNREAD_BYTES = 4 * 1024 * 1024;

export default async function chatRoute(app: FastifyInstance, options: ChatRouteOptions) {
  // Closing the server waits for answers still written, not for those read on after their client
  // left (see ChatInput.clientGone): those are waited for here, before the ledger closes (this
  // hook runs before the app's).
  const running = new Set<Promise<unknown>>();
  app.addHook('onClose', async () => {
    await Promise.allSettled([...running]);
  });
  app.post<{ Body: ChatRequest }>(
    '/v1/chat/completions',
    { schema: { body: chatRequestSchema } },
    async (request, reply) => {
      const { model } = resolveChatRequest(request.body, options.catalog, options.defaultModel);
      const clientGone = new AbortController();
      const leave = () => {
        if (!reply.raw.writableFinished) clientGone.abort();
      };
      const { socket } = request.raw;
      // Gone already (while its body was read, or the hooks ran): no 'close' is coming. A
      // pipelined request's response hears of its socket closing only from the socket itself.
      if (socket.destroyed) leave();
      else {
        reply.raw.on('close', leave);
        socket.on('close', leave);
      }
      const input: ChatInput = {
        request: request.body,
        model,
        headers: request.headers,
        url: request.url,
        requestId: request.id,
        clientGone: clientGone.signal,
        log: request.log,
        response: {
          headers: (values) => reply.headers(values),
          openStream: () => openEventStream(reply, options.clientStallMs),
        },
      };
      const handled = options.chat.handle(input);
      running.add(handled);
      try {
        const body = await handled;
        return body === undefined ? reply : reply.send(body);
      } catch (error) {
        if (!clientGone.signal.aborted) throw error;
        request.log.info('the client went away before its answer');
        return reply.hijack();
      } finally {
        running.delete(handled);
        socket.off('close', leave);
      }
    },
  );
}

/**
 * Server-sent events to the socket. Writes never wait for the client: the provider's answer is read
 * at its own pace (its usage known, and billed, when it ends) and buffered for a slow client; one
 * that takes nothing of it for `stallMs` while some is waiting, or leaves too much of it unread, is
 * disconnected.
 */
function openEventStream(reply: FastifyReply, stallMs: number): EventSink {
  const body = new PassThrough();
  reply
    .headers({
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      'x-accel-buffering': 'no',
      connection: 'keep-alive',
    })
    .send(body);
  const open = () => !body.destroyed && !body.writableEnded && !reply.raw.destroyed;
  let written = 0;
  // What left the gateway's buffers for the socket: the client's progress.
  const taken = () => written - body.writableLength - body.readableLength;
  const unread = () => body.writableLength + body.readableLength;
  const disconnect = (reason: string) => {
    reply.log.warn({ unreadBytes: unread(), reason }, 'the client left its stream unread: disconnected');
    reply.raw.destroy();
  };
  let stalled: NodeJS.Timeout | undefined;
  const watch = () => {
    if (stalled || unread() === 0) return;
    const progress = taken();
    stalled = setTimeout(() => {
      stalled = undefined;
      // Queued behind an earlier response on its connection (pipelining), it cannot be read yet.
      if (!reply.raw.socket || taken() > progress) return watch();
      if (unread() > 0) disconnect(`nothing read for ${stallMs} ms`);
    }, stallMs);
  };
  body.on('close', () => clearTimeout(stalled));
  return {
    send(...events) {
      if (!open()) return;
      const text = events.map((json) => `data: ${json}\n\n`).join('');
      written += Buffer.byteLength(text);
      if (body.write(text)) return;
      if (unread() > MAX_UNREAD_BYTES) return disconnect(`more than ${MAX_UNREAD_BYTES} bytes unread`);
      watch();
    },
    close(done) {
      if (!open()) return;
      const text = done ? 'data: [DONE]\n\n' : '';
      written += Buffer.byteLength(text);
      body.end(text || undefined);
      watch();
    },
  };
}
