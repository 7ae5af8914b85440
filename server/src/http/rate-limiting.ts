import { createRequire } from 'node:module';
import { setTimeout as delay } from 'node:timers/promises';
import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import { ConfigError } from '../config.js';
import { ApiError } from './errors.js';

export interface RateLimitOptions {
  max: number;
  windowMs: number;
  /**
   * Route path as registered (`/v1/models/*`) -> requests per window there, with its own counter:
   * one per path and caller, whatever the method (GET, its HEAD, POST count together). A method
   * and path (`POST /v1/authorize`) counts that method apart, before its path's limit.
   */
  perRoute?: Readonly<Record<string, number>>;
  /** Shared store for several gateway instances (see `connectRateLimitStore`); in memory when absent. */
  redis?: Redis;
  /** The caller's wallet from its credential, if it has one (cached on `request.wallet`). */
  identify?: (request: FastifyRequest) => Promise<string | null>;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The caller's wallet once a credential identified it; rate limits key on it. */
    wallet: string | null;
  }
}

const STORE_CONNECT_WAIT_MS = 1000;
/** Callers whose counters one limit keeps in memory (without Redis): the plugin's own default. */
const LOCAL_COUNTERS_PER_LIMIT = 5000;

/**
 * Limits every route, keyed by wallet when the caller's credential identifies it and by IP before.
 * Routes without their own limit share one counter per caller; a path given one by `perRoute`
 * counts apart, all its methods together but those given one of their own (the plugin's per-route
 * `config.rateLimit` would count each method apart: GET, its automatic HEAD and POST would each get
 * the whole limit). Runs first, before body parsing.
 */
export async function installRateLimiting(app: FastifyInstance, options: RateLimitOptions): Promise<void> {
  app.decorateRequest('wallet', null);
  const { redis } = options;
  if (redis) {
    redis.on('error', (error) => app.log.warn({ err: error }, 'rate-limit store unreachable: not limiting'));
    // Start with limits in force when Redis is there, but never refuse to start without it.
    app.addHook('onReady', async () => {
      if (redis.status === 'ready') return;
      const connected = new Promise<void>((resolve) => redis.once('ready', resolve));
      await Promise.race([connected, delay(STORE_CONNECT_WAIT_MS, undefined, { ref: false })]);
    });
    app.addHook('onClose', async () => {
      redis.disconnect();
    });
  }
  const perRoute = new Map(Object.entries(options.perRoute ?? {}));
  checkPerRouteLimits(app, perRoute);
  /** The configured method and path, or path, a request counts under, when its route has a limit of its own. */
  const limitedPath = (request: FastifyRequest) => {
    if (perRoute.size === 0) return undefined;
    const path = request.routeOptions.url;
    if (path === undefined) return undefined;
    const methodAndPath = `${request.method} ${path}`;
    if (perRoute.has(methodAndPath)) return methodAndPath;
    return perRoute.has(path) ? path : undefined;
  };
  await app.register(rateLimit, {
    global: true,
    hook: 'onRequest',
    // The key names the configured path it counts under (see keyGenerator): no second route lookup.
    max:
      perRoute.size === 0
        ? options.max
        : (_request, key) => {
            const end = key.lastIndexOf(' ');
            return (end === -1 ? undefined : perRoute.get(key.slice(0, end))) ?? options.max;
          },
    timeWindow: options.windowMs,
    redis,
    nameSpace: 'paygate-rl:',
    // One store for every limit (their keys tell them apart): without Redis, room for as many callers per limit.
    cache: LOCAL_COUNTERS_PER_LIMIT * (1 + perRoute.size),
    // An unreachable Redis must not refuse paying callers: requests go through unlimited meanwhile.
    skipOnError: true,
    keyGenerator: async (request: FastifyRequest) => {
      request.wallet ??= (await options.identify?.(request)) ?? null;
      const caller = request.wallet ?? request.ip;
      const path = limitedPath(request);
      // Never a shared counter's key: a wallet or an IP holds no space.
      return path === undefined ? caller : `${path} ${caller}`;
    },
    errorResponseBuilder: (_request, context) =>
      new ApiError(
        429,
        'rate_limited',
        `rate limit of ${context.max} requests per ${options.windowMs / 1000} s exceeded; retry in ${context.after}`,
      ),
  });
  // The plugin limits routes: a request no route matched (404, 405) is counted here, before its body.
  const limitUnmatched = app.rateLimit();
  app.addHook('onRequest', function (request, reply, done) {
    if (!request.is404) return done();
    limitUnmatched.call(this, request, reply).then(() => done(), done);
  });
  // The plugin sends seconds until reset, rounded up; the header is specified as a Unix timestamp.
  // Rounding the clock down as well keeps the sum within a second of the true reset.
  app.addHook('onSend', async (_request, reply) => {
    const reset = reply.getHeader('x-ratelimit-reset');
    if (reset !== undefined) reply.header('x-ratelimit-reset', Math.floor(Date.now() / 1000) + Number(reset));
  });
}

/** Fails at once while Redis is away (no offline queue), so that a request never waits on the store. */
export function connectRateLimitStore(url: string): Redis {
  // Loaded here: a gateway without Redis does without ioredis's few megabytes of heap.
  const { Redis } = createRequire(import.meta.url)('ioredis') as typeof import('ioredis');
  return new Redis(url, { connectTimeout: 500, maxRetriesPerRequest: 1, enableOfflineQueue: false });
}

/** A configured path that names no route is a mistake: start-up stops. */
function checkPerRouteLimits(app: FastifyInstance, perRoute: ReadonlyMap<string, number>): void {
  const routes = new Set<string>();
  app.addHook('onRoute', (route) => {
    routes.add(route.url);
  });
  app.addHook('onReady', async () => {
    // A method and path names the route of its path.
    const unknown = [...perRoute.keys()].filter(
      (limited) => !routes.has(limited.slice(limited.indexOf(' ') + 1)),
    );
    if (unknown.length > 0)
      throw new ConfigError('RATE_LIMITS', `names no route of the gateway: ${unknown.join(', ')}`);
  });
}
