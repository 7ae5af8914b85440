import { once } from 'node:events';
import { connect } from 'node:net';
import { describe, expect, test, vi } from 'vitest';
import { startHarness } from '../providers/gateway-harness.js';

/**
 * While the gateway closes, requests still reaching it (on a connection already open: pipelined, or
 * kept alive behind a request in flight) get the envelope's 503 `service_unavailable` with
 * `retry-after` and the request id, not Fastify's own body.
 */
const SHUTDOWN_TIMEOUT_MS = 300;

/** Splits raw HTTP/1.1 answers (each with a content-length) into status, headers and JSON body. */
function answers(raw: string) {
  const parsed = [];
  let rest = raw;
  while (rest.length > 0) {
    const end = rest.indexOf('\r\n\r\n');
    const [statusLine = '', ...lines] = rest.slice(0, end).split('\r\n');
    const headers = Object.fromEntries(
      lines.map((line) => [
        line.slice(0, line.indexOf(':')).toLowerCase(),
        line.slice(line.indexOf(':') + 1).trim(),
      ]),
    );
    const length = Number(headers['content-length']);
    const body = Buffer.from(rest.slice(end + 4))
      .subarray(0, length)
      .toString('utf8');
    parsed.push({ status: Number(statusLine.split(' ')[1]), headers, body: JSON.parse(body) });
    rest = Buffer.from(rest.slice(end + 4))
      .subarray(length)
      .toString('utf8');
  }
  return parsed;
}

describe('a request arriving while the gateway closes', () => {
  test('gets 503 service_unavailable in the envelope, with retry-after: 1 and x-request-id', {
    timeout: 20_000,
  }, async () => {
    const h = await startHarness({
      shutdownTimeoutMs: SHUTDOWN_TIMEOUT_MS,
      upstreamTimeoutMs: 120_000,
      upstreamCompletionTimeoutMs: 120_000,
    });
    try {
      // A whole answer the provider never gives keeps the connection busy through the shutdown.
      h.anthropic.script({ hang: true });
      const socket = connect(Number(new URL(h.url).port), '127.0.0.1');
      let raw = '';
      socket.on('data', (chunk: Buffer) => {
        raw += chunk.toString('latin1');
      });
      const gone = once(socket, 'close');
      const body = JSON.stringify({
        model: 'anthropic/claude-haiku-4.5',
        messages: [{ role: 'user', content: 'Hi' }],
      });
      socket.write(
        `POST /v1/chat/completions HTTP/1.1\r\nhost: gateway\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
      await vi.waitFor(() => expect(h.anthropic.log).toHaveLength(1), { timeout: 15_000 });
      const closing = h.app.close();
      // The server takes no more connections: the shutdown is under way.
      await vi.waitFor(() => expect(h.app.server.listening).toBe(false));
      socket.write('GET /v1/models HTTP/1.1\r\nhost: gateway\r\n\r\n');
      await Promise.all([closing, gone]);

      const [first, second] = answers(raw);
      // The request in flight was cut at the deadline, as before.
      expect(first?.status).toBe(503);
      expect(first?.body.error.message).toContain('was cut');
      // The one that came during the shutdown: refused in the envelope.
      expect(second?.status).toBe(503);
      expect(second?.headers['content-type']).toMatch(/^application\/json/);
      expect(second?.headers['retry-after']).toBe('1');
      expect(second?.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
      expect(second?.headers.connection).toBe('close');
      expect(second?.body).toMatchObject({
        data: null,
        error: { code: 'service_unavailable', message: expect.stringContaining('shutting down') },
        meta: { path: '/v1/models', timestamp: expect.any(String) },
      });
    } finally {
      await h.close();
    }
  });
});
