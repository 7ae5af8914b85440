import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { ApiError } from './errors.js';
import { operatorAccess } from './operator-access.js';

export interface MetricsRouteOptions {
  registry: Registry;
  /**
   * Bearer tokens that may scrape (METRICS_TOKEN, ADMIN_TOKEN). When there are none, only
   * loopback callers may: the figures (costs, debts, traffic) are the operator's business.
   */
  tokens: ReadonlyArray<string | undefined>;
}

/** GET /metrics in the Prometheus text format. */
export default async function metricsRoute(app: FastifyInstance, options: MetricsRouteOptions) {
  const tokens = options.tokens.filter((token): token is string => token !== undefined);
  const mayScrape = operatorAccess(tokens);
  app.get('/metrics', async (request, reply) => {
    if (!mayScrape(request))
      throw new ApiError(
        401,
        'unauthorized',
        tokens.length > 0
          ? 'send the metrics token as "Authorization: Bearer <METRICS_TOKEN>"'
          : 'metrics are served to loopback callers only; set METRICS_TOKEN to scrape from elsewhere',
        { headers: { 'www-authenticate': 'Bearer' } },
      );
    const text = await options.registry.metrics();
    return reply.type(options.registry.contentType).send(text);
  });
}
