import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import { type Harness, startHarness } from '../providers/gateway-harness.js';
import { startGatewayProcess } from '../support/gateway-process.js';

/**
 * REQUEST_TIMEOUT_MS bounds the time to receive a whole request: a client that sends part of one
 * and stalls is answered 408 and disconnected, instead of holding its connection and buffered body
 * forever. It never bounds an answer: a stream slower than it runs to its end.
 */
const REQUEST_TIMEOUT_MS = 300;
const CLAUDE = 'anthropic/claude-haiku-4.5';
const GEMINI = 'google/gemini-2.5-pro';
const hi = [{ role: 'user', content: 'Hi' }];

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ requestTimeoutMs: REQUEST_TIMEOUT_MS });
});
afterAll(() => h.close());

/** Sends `text` on a new connection; resolves with what came back once it closed, or `open` if it had not within `waitMs`. */
async function stall(
  text: string,
  waitMs: number,
  url = h.url,
): Promise<{ reply: string; closedAfterMs: number | 'open' }> {
  const socket: Socket = connect(Number(new URL(url).port), '127.0.0.1');
  let reply = '';
  socket.on('data', (chunk: Buffer) => {
    reply += chunk.toString('utf8');
  });
  socket.on('error', () => undefined);
  const started = performance.now();
  socket.write(text);
  const closed = once(socket, 'close').then(() => performance.now() - started);
  const waited = new Promise<'open'>((resolve) => setTimeout(() => resolve('open'), waitMs));
  const closedAfterMs = await Promise.race([closed, waited]);
  socket.destroy();
  return { reply, closedAfterMs };
}

/** The status, headers and JSON body of a raw HTTP/1.1 answer. */
function parse(reply: string) {
  const [head = '', body = ''] = reply.split('\r\n\r\n');
  const [statusLine = '', ...lines] = head.split('\r\n');
  const headers = Object.fromEntries(
    lines.map((line) => [
      line.slice(0, line.indexOf(':')).toLowerCase(),
      line.slice(line.indexOf(':') + 1).trim(),
    ]),
  );
  return { status: Number(statusLine.split(' ')[1]), headers, body: JSON.parse(body) };
}

describe('a client that stalls mid-request', () => {
  test.each([
    [
      'in its body',
      'POST /v1/chat/completions HTTP/1.1\r\nhost: gateway\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{"model":',
      '/v1/chat/completions',
    ],
    ['in its headers', 'POST /v1/chat/completions HTTP/1.1\r\nhost: gateway\r\ncontent-type: appl', ''],
  ])(
    '%s gets 408 request_timeout in the envelope, and its connection is closed',
    async (_where, sent, path) => {
      const { reply, closedAfterMs } = await stall(sent, 10 * REQUEST_TIMEOUT_MS);
      expect(closedAfterMs).not.toBe('open');
      expect(closedAfterMs).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 50);
      const answer = parse(reply);
      expect(answer.status).toBe(408);
      expect(answer.headers['content-type']).toMatch(/^application\/json/);
      expect(answer.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
      expect(answer.headers.connection).toBe('close');
      expect(answer.body).toMatchObject({
        data: null,
        error: { code: 'request_timeout', message: expect.stringContaining('not received in time') },
        meta: { path, timestamp: expect.any(String) },
      });
    },
  );

  test('a request that is not HTTP at all gets 400 in the envelope, not Fastify’s body', async () => {
    const { reply, closedAfterMs } = await stall('HELLO\r\n\r\n', 10 * REQUEST_TIMEOUT_MS);
    expect(closedAfterMs).not.toBe('open');
    const answer = parse(reply);
    expect(answer.status).toBe(400);
    expect(answer.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(answer.body).toMatchObject({ data: null, error: { code: 'validation_error' } });
  });
});

describe('answers are not bounded by it', () => {
  test('a slow but steady stream, many times longer than the timeout, runs to its end', async () => {
    // Eight texts 250 ms apart: 2 s in all.
    const pieces = ['one ', 'two ', 'three ', 'four ', 'five ', 'six ', 'seven ', 'eight'];
    h.anthropic.script({ text: pieces, usage: { input_tokens: 4 }, delayMs: 250 });
    const started = performance.now();
    const res = await fetch(`${h.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: CLAUDE, messages: hi, stream: true }),
    });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(performance.now() - started).toBeGreaterThan(5 * REQUEST_TIMEOUT_MS);
    for (const piece of pieces) expect(text).toContain(`"content":"${piece}"`);
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
  });

  test('a whole answer generated for longer than the timeout is waited for', async () => {
    h.gemini.script({
      text: 'Slow thought.',
      usage: { promptTokenCount: 4 },
      delayMs: 4 * REQUEST_TIMEOUT_MS,
    });
    const res = await fetch(`${h.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: GEMINI, messages: hi }),
    });
    expect(res.status).toBe(200);
    expect(
      ((await res.json()) as { choices: Array<{ message: { content: string } }> }).choices[0]?.message
        .content,
    ).toBe('Slow thought.');
  });
});

describe('a gateway started with REQUEST_TIMEOUT_MS', () => {
  test('disconnects a stalled body at that time, and logs it at info level, not as a fault', {
    timeout: 60_000,
  }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'paygate-request-timeout-'));
    const gateway = await startGatewayProcess({
      REQUEST_TIMEOUT_MS: '1000',
      DATABASE_URL: join(dir, 'gateway.sqlite'),
      JWT_SECRET: 'a'.repeat(32),
      CHAIN_RPC_URL: 'http://127.0.0.1:9',
      CHAIN_ID: '8453',
      TREASURY_ADDRESS: '0x00000000000000000000000000000000000000aa',
      SESSION_KEY_PRIVATE_KEY: `0x${'11'.repeat(32)}`,
    });
    try {
      const { reply, closedAfterMs } = await stall(
        'POST /v1/chat/completions HTTP/1.1\r\nhost: gateway\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{"model":',
        10_000,
        gateway.url,
      );
      // Node looks for requests past their time every tenth of the timeout here.
      expect(closedAfterMs).toBeGreaterThanOrEqual(950);
      expect(closedAfterMs).toBeLessThan(2_500);
      const answer = parse(reply);
      expect(answer.status).toBe(408);
      await vi.waitFor(() =>
        expect(gateway.logs).toContainEqual(
          expect.objectContaining({
            level: 30,
            msg: 'connection refused',
            reqId: answer.headers['x-request-id'],
          }),
        ),
      );
      // The request whose body never came ends too: its client's doing, not the gateway's fault.
      await vi.waitFor(() =>
        expect(gateway.logs).toContainEqual(
          expect.objectContaining({ level: 30, msg: 'request refused', code: 'validation_error' }),
        ),
      );
      expect(gateway.logs.filter((log) => Number(log.level) >= 50)).toEqual([]);
    } finally {
      await gateway.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
