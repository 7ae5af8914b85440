import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { buildApp } from '../../src/app.js';
import { ConfigError } from '../../src/config.js';
import { testConfig } from '../support/config.js';

const webDir = mkdtempSync(join(tmpdir(), 'paygate-web-'));
const INDEX = '<!doctype html><title>paygate</title><div id="root"></div>';
writeFileSync(join(webDir, 'index.html'), INDEX);
mkdirSync(join(webDir, 'assets'));
writeFileSync(join(webDir, 'assets', 'index-3f2a.js'), 'console.log("dashboard")');
writeFileSync(join(webDir, 'favicon.svg'), '<svg xmlns="http://www.w3.org/2000/svg"/>');

const app = await buildApp(testConfig({ webDir }));
const base = await app.listen({ port: 0, host: '127.0.0.1' });
afterAll(async () => {
  await app.close();
  rmSync(webDir, { recursive: true, force: true });
});

const BROWSER_ACCEPT = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';
const get = (path: string, accept?: string) => fetch(`${base}${path}`, { headers: accept ? { accept } : {} });

describe('the dashboard is served at /', () => {
  test('GET / is the page', async () => {
    const res = await get('/', BROWSER_ACCEPT);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    expect(res.headers.get('cache-control')).toBe('no-cache');
    expect(await res.text()).toBe(INDEX);
  });

  test('hashed assets are served and cached for good', async () => {
    const res = await get('/assets/index-3f2a.js');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/javascript/);
    expect(res.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(await res.text()).toBe('console.log("dashboard")');
  });

  test('other files are revalidated', async () => {
    const res = await get('/favicon.svg');
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-cache');
  });

  test('a page the client routes (browser navigation) gets index.html', async () => {
    const res = await get('/usage/2025', BROWSER_ACCEPT);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe(INDEX);
  });
});

describe('the API keeps its answers', () => {
  test('GET /health is JSON', async () => {
    const res = await get('/health', BROWSER_ACCEPT);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect((await res.json()).data.status).toBeDefined();
  });

  test.each([
    ['/v1/nothing-here', BROWSER_ACCEPT],
    ['/graphql/nothing-here', BROWSER_ACCEPT],
    ['/usage/2025', 'application/json'],
    ['/usage/2025', undefined],
    ['/assets/missing.js', '*/*'],
  ])('GET %s (accept %s) is the 404 envelope', async (path, accept) => {
    const res = await get(path, accept);
    expect(res.status).toBe(404);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const body = await res.json();
    expect(body.data).toBeNull();
    expect(body.error.code).toBe('not_found');
  });

  test('a POST to a page path is a 404 envelope, not the page', async () => {
    const res = await fetch(`${base}/usage`, {
      method: 'POST',
      headers: { accept: BROWSER_ACCEPT, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(res.status).toBe(404);
    expect((await res.json()).error.code).toBe('not_found');
  });
});

test('a WEB_DIR without index.html stops start-up naming the variable', async () => {
  const empty = mkdtempSync(join(tmpdir(), 'paygate-web-empty-'));
  try {
    const error = await buildApp(testConfig({ webDir: empty })).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).variable).toBe('WEB_DIR');
  } finally {
    rmSync(empty, { recursive: true, force: true });
  }
});
