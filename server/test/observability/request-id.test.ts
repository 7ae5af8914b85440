import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, test } from 'vitest';

const SERVER_DIR = fileURLToPath(new URL('../..', import.meta.url));
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

type LogLine = Record<string, unknown> & { reqId?: string; msg?: string };

const dir = mkdtempSync(join(tmpdir(), 'paygate-reqid-'));
const gateway = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
  cwd: SERVER_DIR,
  env: {
    PATH: process.env.PATH,
    DO_NOT_TRACK: '1',
    PORT: '0',
    LOG_LEVEL: 'info',
    DATABASE_URL: join(dir, 'gateway.sqlite'),
    JWT_SECRET: 'r'.repeat(32),
    CHAIN_RPC_URL: 'http://127.0.0.1:9',
    CHAIN_ID: '8453',
    TREASURY_ADDRESS: '0x00000000000000000000000000000000000000aa',
    SESSION_KEY_PRIVATE_KEY: `0x${'22'.repeat(32)}`,
  },
  stdio: ['ignore', 'pipe', 'inherit'],
});
const exited = once(gateway, 'exit');
const logs: LogLine[] = [];
createInterface({ input: gateway.stdout }).on('line', (line) => {
  if (line.startsWith('{')) logs.push(JSON.parse(line));
});

let base: string;
beforeAll(async () => {
  while (!base) {
    const listening = logs.find((log) => String(log.msg).startsWith('Server listening at '));
    if (listening) base = String(listening.msg).replace('Server listening at ', '');
    else if (gateway.exitCode !== null) throw new Error(`the gateway exited with ${gateway.exitCode}`);
    else await new Promise((resolve) => setTimeout(resolve, 50));
  }
});
afterAll(async () => {
  if (gateway.exitCode === null) {
    gateway.kill('SIGTERM');
    await exited;
  }
  rmSync(dir, { recursive: true, force: true });
});

/** The log lines of one request, once its `request completed` line is written. */
async function linesOf(reqId: string): Promise<LogLine[]> {
  while (!logs.some((log) => log.reqId === reqId && log.msg === 'request completed'))
    await new Promise((resolve) => setTimeout(resolve, 20));
  return logs.filter((log) => log.reqId === reqId);
}

test('a request without an id gets a fresh UUID (version 7), in its x-request-id header and in every log line it causes', async () => {
  const res = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages: 'not a list' }),
  });
  expect(res.status).toBe(400);
  const id = res.headers.get('x-request-id') ?? '';
  expect(id).toMatch(UUID);
  const lines = await linesOf(id);
  expect(lines.map((line) => line.msg)).toEqual(['request refused', 'request completed']);
  expect(lines[0]).toMatchObject({ code: 'validation_error' });
  expect(lines[1]).toMatchObject({
    req: { method: 'POST', url: '/v1/chat/completions' },
    res: { statusCode: 400 },
    responseTime: expect.any(Number),
  });
});

test('an id that is not a plain token is replaced, never echoed', async () => {
  for (const given of ['two words', 'x'.repeat(129), 'semi;colon', 'a/b', '']) {
    const res = await fetch(`${base}/health`, { headers: { 'x-request-id': given } });
    const id = res.headers.get('x-request-id') ?? '';
    expect(id).toMatch(UUID);
    expect((await linesOf(id)).length).toBeGreaterThanOrEqual(1);
  }
});

test('ids are time-ordered UUIDs (version 7): each later request sorts after the earlier ones', async () => {
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) ids.push((await fetch(`${base}/v1/models`)).headers.get('x-request-id') ?? '');
  for (const id of ids) expect(id).toMatch(UUID);
  expect([...ids].sort()).toEqual(ids);
  // The first 48 bits are the issue time in milliseconds.
  const issuedAt = Number.parseInt(ids[0]?.replace('-', '').slice(0, 12) ?? '', 16);
  expect(Math.abs(issuedAt - Date.now())).toBeLessThan(60_000);
});

test('every request gets its own id', async () => {
  const ids = await Promise.all(
    Array.from({ length: 5 }, async () => (await fetch(`${base}/v1/models`)).headers.get('x-request-id')),
  );
  expect(new Set(ids).size).toBe(5);
  for (const id of ids) expect(await linesOf(String(id))).toHaveLength(1);
});
