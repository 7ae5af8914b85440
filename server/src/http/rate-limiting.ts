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
  /** Route path as registered (`/v1/models/*`) -> requests per window there, with its own counter. */
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

/**
 * Limits every route, keyed by wallet when the caller's credential identifies it and by IP before.
 * Routes without their own limit share one counter per caller; a route given a limit (by
 * `perRoute`, which wins, or its own `config.rateLimit`) counts apart. Runs first, before body parsing.
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
  applyPerRouteLimits(app, options.perRoute ?? {});
  await app.register(rateLimit, {
    global: true,
    hook: 'onRequest',
    max: options.max,
    timeWindow: options.windowMs,
    redis,
    nameSpace: 'paygate-rl:',
    // An unreachable Redis must not refuse paying callers: requests go through unlimited meanwhile.
    skipOnError: true,
    keyGenerator: async (request: FastifyRequest) => {
      request.wallet ??= (await options.identify?.(request)) ?? null;
      return request.wallet ?? request.ip;
    },
    errorResponseBuilder: (_request, context) =>
      new ApiError(
        429,
        'rate_limited',
        `rate limit of ${context.max} requests per ${options.windowMs / 1000} s exceeded; retry in ${context.after}`,
      ),
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

/** Must run before the plugin's own onRoute hook, which reads `config.rateLimit`. */
function applyPerRouteLimits(app: FastifyInstance, perRoute: Readonly<Record<string, number>>): void {
  const routes = new Set<string>();
  app.addHook('onRoute', (route) => {
    routes.add(route.url);
    const max = perRoute[route.url];
    if (max === undefined) return;
    const own = route.config?.rateLimit;
    route.config = { ...route.config, rateLimit: { ...(typeof own === 'object' ? own : {}), max } };
  });
  app.addHook('onReady', async () => {
    const unknown = Object.keys(perRoute).filter((path) => !routes.has(path));
    if (unknown.length > 0)
      throw new ConfigError('RATE_LIMITS', `names no route of the gateway: ${unknown.join(', ')}`);
  });
}
