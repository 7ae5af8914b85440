import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ConfigError } from '../config.js';
import { servedPath } from '../served-path.js';

/** Paths the API owns: an unknown one is a 404 envelope, never the dashboard's page. */
const API_PATHS = /^\/(v1|graphql|health)(\/|$)/;

/** Vite names built assets by content hash, so they never change under their name. */
const HASHED_ASSETS = '/assets/';

/**
 * Serves the built dashboard at `/`. Unknown GET paths that a browser navigates to get `index.html`
 * (the app routes on the client); API paths and non-HTML requests keep the 404 envelope.
 */
export async function installWebRoute(app: FastifyInstance, webDir: string): Promise<void> {
  const indexPath = join(webDir, 'index.html');
  if (!existsSync(indexPath)) throw new ConfigError('WEB_DIR', `has no index.html (${webDir})`);
  const indexHtml = await readFile(indexPath);
  await app.register(fastifyStatic, {
    root: webDir,
    wildcard: false,
    decorateReply: false,
    cacheControl: false,
    setHeaders: (response, path) => {
      const immutable = path.startsWith(join(webDir, HASHED_ASSETS));
      response.setHeader('cache-control', immutable ? 'public, max-age=31536000, immutable' : 'no-cache');
    },
  });
  app.addHook('onRequest', async (request, reply) => {
    if (!wantsDashboardPage(request)) return;
    return reply.type('text/html; charset=utf-8').header('cache-control', 'no-cache').send(indexHtml);
  });
}

function wantsDashboardPage(request: FastifyRequest): boolean {
  return (
    request.is404 &&
    (request.method === 'GET' || request.method === 'HEAD') &&
    !API_PATHS.test(servedPath(request.url)) &&
    (request.headers.accept ?? '').includes('text/html')
  );
}
