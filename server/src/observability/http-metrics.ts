import type { FastifyInstance } from 'fastify';
import type { GatewayMetrics } from './metrics.js';

/** Requests that matched no route share one label, so a scanner cannot create a series per path. */
export const UNMATCHED_ROUTE = 'unmatched';
/** The status counted for a response whose connection closed before it finished (as nginx counts a client that left). */
export const UNFINISHED_STATUS = 499;

/**
 * Counts and times every request by its route template (`/v1/models/*`), method and status, when its
 * response closes: a stream cut off, or whose client left, is counted too (Fastify's onResponse
 * runs only for responses that finished).
 */
export function installHttpMetrics(app: FastifyInstance, metrics: GatewayMetrics): void {
  app.addHook('onRequest', (request, reply, done) => {
    // Not `writableFinished`: a response destroyed under its stream (cut off, or its client gone)
    // can read as finished once Fastify has ended it.
    let finished = false;
    reply.raw.once('finish', () => {
      // A socket destroyed with writes pending still completes them, and the response finishes.
      finished = !request.raw.socket.destroyed;
    });
    reply.raw.once('close', () => {
      const route = request.routeOptions.url ?? UNMATCHED_ROUTE;
      const status = finished ? reply.statusCode : UNFINISHED_STATUS;
      metrics.httpRequest(route, request.method, status, reply.elapsedTime / 1000);
    });
    done();
  });
}
