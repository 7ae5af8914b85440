import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, test } from 'vitest';
import { startAnvil } from '../../devkit/chain/index.js';

const SERVER_DIR = fileURLToPath(new URL('../..', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'paygate-main-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const children: ChildProcess[] = [];
afterAll(() => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
});

/** A good environment that needs nothing running: the chain is only probed by /health. */
const goodEnv = {
  PORT: '0',
  HOST: '127.0.0.1',
  LOG_LEVEL: 'info',
  DATABASE_URL: join(dir, 'gateway.sqlite'),
  JWT_SECRET: 'a'.repeat(32),
  CHAIN_RPC_URL: 'http://127.0.0.1:9',
  // Base: the Delegation Framework's addresses are known there, so no CHAIN_ENVIRONMENT_FILE is needed.
  CHAIN_ID: '8453',
  USDC_ADDRESS: '0x00000000000000000000000000000000000000bb',
  TREASURY_ADDRESS: '0x00000000000000000000000000000000000000aa',
  SESSION_KEY_PRIVATE_KEY: `0x${'11'.repeat(32)}`,
};

/** `main.ts` as a real process with only the given environment (plus PATH). */
function startGateway(env: Record<string, string | undefined>) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: SERVER_DIR,
    env: { PATH: process.env.PATH, DO_NOT_TRACK: '1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  const logs: Array<Record<string, unknown>> = [];
  const stdoutLines: string[] = [];
  let stderr = '';
  child.stderr?.on('data', (chunk) => {
    stderr += chunk;
  });
  const lines = createInterface({ input: child.stdout! });
  const waiters: Array<(log: Record<string, unknown>) => void> = [];
  lines.on('line', (line) => {
    stdoutLines.push(line);
    try {
      const log = JSON.parse(line);
      logs.push(log);
      for (const waiter of waiters) waiter(log);
    } catch {
      // not a log line: kept in stdoutLines for the assertions
    }
  });
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  /** Resolves with the first log line matching, or rejects when the process exits first. */
  const logLine = (match: (log: Record<string, unknown>) => boolean) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const found = logs.find(match);
      if (found) return resolve(found);
      waiters.push((log) => match(log) && resolve(log));
      void exited.then((code) => reject(new Error(`gateway exited with ${code}: ${stderr}`)));
    });
  return { child, logs, stdoutLines, exited, logLine, stderr: () => stderr };
}

describe('main.ts with a good environment', () => {
  test('listens, logs each request with its id, and shuts down gracefully on SIGTERM', async () => {
    const gateway = startGateway(goodEnv);
    const listening = await gateway.logLine((log) => String(log.msg).startsWith('Server listening at '));
    const address = String(listening.msg).replace('Server listening at ', '');
    expect(address).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);

    const res = await fetch(`${address}/v1/models`, { headers: { 'x-request-id': 'main-test-1' } });
    expect(res.status).toBe(200);
    const id = res.headers.get('x-request-id');
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(res.headers.get('x-client-request-id')).toBe('main-test-1');
    const completed = await gateway.logLine((log) => log.reqId === id && log.msg === 'request completed');
    expect(completed).toMatchObject({
      level: 30,
      clientRequestId: 'main-test-1',
      req: { method: 'GET', url: '/v1/models' },
      res: { statusCode: 200 },
      responseTime: expect.any(Number),
    });

    gateway.child.kill('SIGTERM');
    expect(await gateway.exited).toBe(0);
    expect(gateway.logs.some((log) => String(log.msg).startsWith('shutting down'))).toBe(true);
    await expect(fetch(`${address}/health`)).rejects.toThrow();
  });

  test('a second SIGTERM ends a shutdown still waiting for a request: exit 1 at once', {
    timeout: 15_000,
  }, async () => {
    const gateway = startGateway(goodEnv);
    const listening = await gateway.logLine((log) => String(log.msg).startsWith('Server listening at '));
    const { port } = new URL(String(listening.msg).replace('Server listening at ', ''));
    // A request answered, then one whose body is still coming: the shutdown waits for it (up to
    // SHUTDOWN_TIMEOUT_MS, 25 s by default).
    const socket = connect(Number(port), '127.0.0.1');
    socket.on('error', () => {});
    socket.write(
      'GET /v1/models HTTP/1.1\r\nhost: gateway\r\n\r\n' +
        'POST /v1/chat/completions HTTP/1.1\r\nhost: gateway\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{',
    );
    const [answered] = await once(socket, 'data');
    expect(String(answered)).toMatch(/^HTTP\/1\.1 200 /);

    gateway.child.kill('SIGTERM');
    await gateway.logLine((log) => String(log.msg).startsWith('shutting down'));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(gateway.child.exitCode).toBeNull();

    gateway.child.kill('SIGTERM');
    expect(await gateway.exited).toBe(1);
    expect(gateway.logs.some((log) => String(log.msg).startsWith('second signal: exiting now'))).toBe(true);
    socket.destroy();
  });

  test('does not log credentials', async () => {
    const gateway = startGateway(goodEnv);
    const listening = await gateway.logLine((log) => String(log.msg).startsWith('Server listening at '));
    const address = String(listening.msg).replace('Server listening at ', '');
    await fetch(`${address}/nope`, {
      headers: {
        authorization: 'Bearer secret-jwt-value',
        'payment-signature': 'secret-proof-value',
        'x-payment': 'secret-v1-proof-value',
      },
    });
    await gateway.logLine((log) => log.msg === 'request completed');
    // A request Node cannot parse (a space in a header name): its raw bytes are not logged either.
    const socket = connect(Number(new URL(address).port), '127.0.0.1');
    socket.on('error', () => {});
    socket.write(
      'GET /v1/models HTTP/1.1\r\nauthorization: Bearer secret-raw-value\r\nbad header: x\r\n\r\n',
    );
    const [refused] = await once(socket, 'data');
    expect(String(refused)).toMatch(/^HTTP\/1\.1 400 /);
    await gateway.logLine((log) => log.msg === 'connection refused');
    socket.destroy();
    gateway.child.kill('SIGTERM');
    expect(await gateway.exited).toBe(0);
    const logged = gateway.stdoutLines.join('\n');
    for (const secret of [
      'secret-jwt-value',
      'secret-proof-value',
      'secret-v1-proof-value',
      'secret-raw-value',
    ])
      expect(logged).not.toContain(secret);
    // Node's parse errors carry the raw request (as a Buffer, which pino writes byte by byte).
    expect(logged).not.toContain('rawPacket');
  });
});

describe('main.ts on a SQLite file another gateway process is using', () => {
  test('exits 1 naming the file; once the first is gone, it starts', async () => {
    const env = { ...goodEnv, DATABASE_URL: join(dir, 'shared', 'gateway.sqlite') };
    const first = startGateway(env);
    await first.logLine((log) => String(log.msg).startsWith('Server listening at '));
    const second = startGateway(env);
    const listening = second
      .logLine((log) => String(log.msg).startsWith('Server listening at '))
      .then(
        () => 'listening',
        () => 'exited',
      );
    expect(await Promise.race([second.exited, listening])).toBe(1);
    expect(second.stderr()).toContain(`another gateway process is using ${env.DATABASE_URL}`);

    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    const third = startGateway(env);
    await third.logLine((log) => String(log.msg).startsWith('Server listening at '));
    third.child.kill('SIGTERM');
    expect(await third.exited).toBe(0);
  });
});

describe('main.ts on a node of another chain than CHAIN_ID', () => {
  test('exits 1 with one line naming CHAIN_ID and both chain ids, and not the RPC URL', async () => {
    const anvil = await startAnvil();
    try {
      // A Base Sepolia node (here anvil, chain 31337) with CHAIN_ID left at Base's (8453).
      const gateway = startGateway({ ...goodEnv, CHAIN_RPC_URL: anvil.rpcUrl });
      const listening = gateway
        .logLine((log) => String(log.msg).startsWith('Server listening at '))
        .then(
          () => 'listening',
          () => 'exited',
        );
      expect(await Promise.race([gateway.exited, listening])).toBe(1);
      expect(gateway.stderr().trim().split('\n')).toEqual([
        'Invalid configuration: CHAIN_ID is 8453, but the node at CHAIN_RPC_URL is on chain 31337: point CHAIN_RPC_URL at a node of chain 8453, or set CHAIN_ID to 31337',
      ]);
      expect(gateway.logs).toEqual([]);
    } finally {
      await anvil.stop();
    }
  });
});

describe.concurrent('main.ts with a bad environment exits 1 with one line naming the variable', () => {
  const badCatalog = join(dir, 'bad-models.json');
  writeFileSync(badCatalog, '{"models": [{"id": "x"}]}');
  test.each([
    ['JWT_SECRET', { JWT_SECRET: undefined }],
    ['PORT', { PORT: 'http' }],
    ['TREASURY_ADDRESS', { TREASURY_ADDRESS: '0x12' }],
    ['MODELS_FILE', { MODELS_FILE: badCatalog }],
    ['MODELS_FILE', { MODELS_FILE: join(dir, 'missing.json') }],
    ['DEFAULT_MODEL', { DEFAULT_MODEL: 'openai/gpt-9' }],
    ['RATE_LIMITS', { RATE_LIMITS: '/v1/chat=5' }],
  ])('%s', async (variable, env) => {
    const gateway = startGateway({ ...goodEnv, ...env });
    expect(await gateway.exited).toBe(1);
    const lines = gateway.stderr().trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`^Invalid configuration: ${variable} `));
  });
});
