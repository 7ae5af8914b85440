import type { FastifyInstance } from 'fastify';

/**
 * A 413 keeps its connection, and the rest of the refused body is read and discarded: Fastify
 * closes the connection after a refused body, which resets a client still sending it before it
 * reads the answer (undici, the openai SDK: a connection error, which it retries). At most twice
 * the body limit is discarded: past it the connection is closed, at once when the body declares
 * a length past it.
 */
export function discardOversizedBodies(app: FastifyInstance): void {
  app.addHook('onSend', async (request, reply, payload) => {
    const body = request.raw;
    if (reply.statusCode !== 413 || body.complete) return payload;
    const bound = 2 * (request.routeOptions.bodyLimit ?? app.initialConfig.bodyLimit ?? 0);
    if (Number(request.headers['content-length']) > bound) return payload;
    reply.removeHeader('connection');
    let discarded = 0;
    body.on('data', (chunk: Buffer) => {
      discarded += chunk.length;
      if (discarded > bound) body.socket.destroy();
    });
    return payload;
  });
}
