import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { Catalog } from '../catalog/catalog.js';
import type { ChatRequest } from '../providers/openai-types.js';
import type { ChatInput, ChatService } from '../services/chat-service.js';
import { resolveChatRequest } from './chat-request-rules.js';
import { chatRequestSchema } from './chat-request-schema.js';
import { errorBody } from './errors.js';
import { type EventStreamOptions, openEventStream } from './event-stream.js';

export interface ChatRouteOptions {
  catalog: Catalog;
  defaultModel: string;
  chat: ChatService;
  /** How event streams treat slow and silent clients. */
  streams: EventStreamOptions;
  /** The requests being handled (their handlers' promises), for the app's shutdown to wait on. */
  running: Set<Promise<unknown>>;
}

export default async function chatRoute(app: FastifyInstance, options: ChatRouteOptions) {
  // Closing the server waits for answers still written, not for those read on after their client
  // left (see ChatInput.clientGone): those are waited for here, before the ledger closes (this
  // hook runs before the app's).
  const { running } = options;
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
      let stopHearing = () => {};
      if (socket.destroyed) leave();
      else {
        reply.raw.on('close', leave);
        stopHearing = whenClosed(socket, leave);
      }
      let streamed = false;
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
          openStream: () => {
            streamed = true;
            return openEventStream(reply, options.streams, clientGone.signal);
          },
          errorEvent: (error) => JSON.stringify({ error: errorBody(error) }),
        },
      };
      const handled = options.chat.handle(input);
      running.add(handled);
      try {
        const body = await handled;
        if (body !== undefined) return reply.send(body);
        // A stream answered by itself; one whose client left before it opened has no one to answer.
        return streamed ? reply : reply.hijack();
      } catch (error) {
        if (!clientGone.signal.aborted) throw error;
        request.log.info('the client went away before its answer');
        return reply.hijack();
      } finally {
        running.delete(handled);
        // A stream still being written (queued behind an earlier response on its connection, say)
        // hears of its client leaving until it is.
        if (reply.raw.writableFinished) stopHearing();
        else reply.raw.once('finish', stopHearing);
      }
    },
  );
}

/** What each socket's requests in flight do when it closes. */
const closeListeners = new WeakMap<Socket, Set<() => void>>();

/**
 * Calls `listener` when `socket` closes, until the returned function is called. One 'close' listener
 * per socket, however many requests are pipelined on it (one each would pass Node's limit of 10 and
 * warn), kept for the socket's life: a keep-alive connection's requests add none.
 */
function whenClosed(socket: Socket, listener: () => void): () => void {
  let listeners = closeListeners.get(socket);
  if (!listeners) {
    const all = new Set<() => void>();
    socket.once('close', () => {
      for (const each of all) each();
    });
    closeListeners.set(socket, all);
    listeners = all;
  }
  const own = listeners;
  own.add(listener);
  return () => own.delete(listener);
}
