import type { FastifyInstance, FastifyRequest } from 'fastify';
import { success } from './envelope.js';

/** `warning`: up, but short of something the operator must see to soon (the relayer's ETH). */
export type DependencyStatus = 'up' | 'down' | 'unconfigured' | 'warning';

export interface DependencyState {
  status: DependencyStatus;
  detail?: string;
  /** Structured state an operator can act on (e.g. the collector's failing payers). */
  state?: Record<string, unknown>;
}

export interface DependencyCheck {
  name: string;
  /** Whether the gateway is degraded when this dependency is not up (a warning does not degrade it). */
  critical: boolean;
  /** Must be cheap: a cached state or a trivial local query, never a provider call. */
  check(): Promise<DependencyState>;
}

export interface HealthRouteOptions {
  version: string;
  checks: DependencyCheck[];
  /**
   * Who sees each dependency's detail and state (the collector's failing payers, a database's error):
   * the operator. Anyone else, a load balancer included, sees the statuses.
   */
  isOperator(request: FastifyRequest): boolean;
}

export default async function healthRoute(app: FastifyInstance, options: HealthRouteOptions) {
  const startedAt = Date.now();
  app.get('/health', async (request) => {
    const results = await Promise.all(
      options.checks.map(async (dependency) => {
        try {
          return { dependency, result: await dependency.check() };
        } catch (error) {
          return { dependency, result: { status: 'down' as const, detail: (error as Error).message } };
        }
      }),
    );
    const degraded = results.some(
      ({ dependency, result }) =>
        dependency.critical && result.status !== 'up' && result.status !== 'warning',
    );
    const shown = options.isOperator(request)
      ? (result: DependencyState) => result
      : (result: DependencyState) => ({ status: result.status });
    return success(
      {
        status: degraded ? 'degraded' : 'ok',
        version: options.version,
        uptimeSeconds: Math.floor((Date.now() - startedAt) / 1000),
        dependencies: Object.fromEntries(
          results.map(({ dependency, result }) => [dependency.name, shown(result)]),
        ),
      },
      request.url,
    );
  });
}
