import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { DependencyCheck, DependencyState } from '../health.js';
import { success } from './envelope.js';

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
