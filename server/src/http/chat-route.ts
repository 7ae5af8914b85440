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
}

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
      // Gone already (while its body was read, or the hooks ran): no 'close' is coming.
      if (request.raw.socket.destroyed) leave();
      else reply.raw.on('close', leave);
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
          openStream: () => openEventStream(reply),
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
      }
    },
  );
}

/** Server-sent events straight to the socket: no buffering, and writes wait while the client is slow. */
function openEventStream(reply: FastifyReply): EventSink {
  const body = new PassThrough();
  reply
    .headers({
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      'x-accel-buffering': 'no',
      connection: 'keep-alive',
    })
    .send(body);
  const open = () => !body.destroyed && !body.writableEnded;
  return {
    send(...events) {
      if (!open()) return Promise.resolve();
      if (body.write(events.map((json) => `data: ${json}\n\n`).join(''))) return Promise.resolve();
      return new Promise((resolve) => {
        const settle = () => {
          body.off('drain', settle);
          body.off('close', settle);
          resolve();
        };
        body.on('drain', settle);
        body.on('close', settle);
      });
    },
    close(done) {
      if (open()) body.end(done ? 'data: [DONE]\n\n' : undefined);
    },
  };
}
