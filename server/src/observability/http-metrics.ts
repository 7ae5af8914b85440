import type { FastifyInstance } from 'fastify';
import type { GatewayMetrics } from './metrics.js';

/** Requests that matched no route share one label, so a scanner cannot create a series per path. */
export const UNMATCHED_ROUTE = 'unmatched';

/** Counts and times every answered request by its route template (`/v1/models/*`), method and status. */
export function installHttpMetrics(app: FastifyInstance, metrics: GatewayMetrics): void {
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? UNMATCHED_ROUTE;
    metrics.httpRequest(route, request.method, reply.statusCode, reply.elapsedTime / 1000);
  });
}
