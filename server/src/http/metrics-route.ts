import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Registry } from 'prom-client';
import { ApiError } from './errors.js';

export interface MetricsRouteOptions {
  registry: Registry;
  /**
   * Bearer tokens that may scrape (METRICS_TOKEN, ADMIN_TOKEN). When there are none, only
   * loopback callers may: the figures (costs, debts, traffic) are the operator's business.
   */
  tokens: ReadonlyArray<string | undefined>;
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/** GET /metrics in the Prometheus text format. */
export default async function metricsRoute(app: FastifyInstance, options: MetricsRouteOptions) {
  const tokens = options.tokens.filter((token): token is string => token !== undefined);
  app.get('/metrics', async (request, reply) => {
    if (!mayScrape(request, tokens))
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

function mayScrape(request: FastifyRequest, tokens: readonly string[]): boolean {
  if (tokens.length === 0) return isLoopback(request.ip);
  const given = BEARER.exec(request.headers.authorization ?? '')?.[1];
  if (given === undefined) return false;
  // Digests of equal length: the comparison takes the same time whatever the token's length.
  const digest = (value: string) => createHash('sha256').update(value).digest();
  return tokens.some((token) => timingSafeEqual(digest(given), digest(token)));
}

/** `request.ip` honours TRUST_PROXY: behind a trusted proxy it is the original caller's address. */
function isLoopback(ip: string): boolean {
  return ip === '::1' || /^(::ffff:)?127\./.test(ip);
}
