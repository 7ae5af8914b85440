import { once } from 'node:events';
import { connect } from 'node:net';
import { promisify } from 'node:util';
import { Agent, fetch } from 'undici';
import { afterAll, describe, expect, test, vi } from 'vitest';
import { UpstreamCutError } from '../../src/providers/types.js';
import { createUpstream } from '../../src/providers/upstream.js';
import { startHarness } from './gateway-harness.js';

/**
 * Closing the gateway (SIGTERM) waits for the requests in flight, up to SHUTDOWN_TIMEOUT_MS; past
 * it, the provider calls still under way are cut: a stream is billed as far as the provider had
 * counted and ends with an error event, a whole answer still awaited is a 503 a client retries.
 * Without the deadline these calls would hold the shutdown for the upstream timeouts (minutes).
 * And a connection whose request ends during the shutdown is closed, not kept alive.
 */
const CLAUDE = 'anthropic/claude-haiku-4.5';
const SHUTDOWN_TIMEOUT_MS = 300;
const limits = {
  shutdownTimeoutMs: SHUTDOWN_TIMEOUT_MS,
  // Far longer than any test: only the shutdown deadline can end a silent upstream here.
  upstreamTimeoutMs: 120_000,
  upstreamCompletionTimeoutMs: 120_000,
};
// A client that keeps its connection open for a minute after an answer, as a pool of one would:
// closing must not wait for it.
const client = new Agent({ keepAliveTimeout: 60_000, keepAliveMaxTimeout: 60_000 });
afterAll(() => client.close());
const chatRequest = (url: string, stream: boolean) =>
  fetch(`${url}/v1/chat/completions`, {
    dispatcher: client,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: CLAUDE, messages: [{ role: 'user', content: 'Hi' }], stream }),
  });

/** The data of each event of a stream's body, read until its end. */
async function eventsOf(body: AsyncIterable<Uint8Array>, onFirst: () => void): Promise<string[]> {
  const decoder = new TextDecoder();
  let text = '';
  let first = true;
  for await (const chunk of body) {
    text += decoder.decode(chunk, { stream: true });
    if (first && text.includes('"content":"a "')) {
      first = false;
      onFirst();
    }
  }
  return text
    .split('\n\n')
    .filter((event) => event.startsWith('data: '))
    .map((event) => event.slice('data: '.length));
}

describe('a shutdown past SHUTDOWN_TIMEOUT_MS', () => {
  test('cuts a stream still running: billed as counted, ended with a 503 error event, and the gateway closes', {
    timeout: 20_000,
  }, async () => {
    const h = await startHarness(limits);
    let closing: Promise<void> | undefined;
    try {
      // Two events of text, then silence: the provider is still generating.
      h.anthropic.script({ text: ['a ', 'b ', 'c'], usage: { input_tokens: 5 }, hangAfterEvents: 4 });
      const response = await chatRequest(h.url, true);
      expect(response.status).toBe(200);
      const events = await eventsOf(response.body!, () => {
        closing = h.app.close();
      });
      await closing;
      expect(events).not.toContain('[DONE]');
      expect(JSON.parse(events.at(-1)!)).toEqual({
        error: {
          code: 'service_unavailable',
          type: 'server_error',
          param: null,
          message: 'the call to anthropic was cut: the gateway is shutting down',
        },
      });
      expect(h.recorder.entries).toHaveLength(1);
      expect(h.recorder.entries[0]!.usage).toMatchObject({ inputTokens: 5, outputTokens: 1, exact: false });
    } finally {
      await h.close();
    }
  });

  test('cuts a whole answer still awaited: 503 with retry-after, nothing billed', {
    timeout: 20_000,
  }, async () => {
    const h = await startHarness(limits);
    try {
      h.anthropic.script({ hang: true });
      const answer = chatRequest(h.url, false);
      await vi.waitFor(() => expect(h.anthropic.log).toHaveLength(1), { timeout: 15_000 });
      const closing = h.app.close();
      const response = await answer;
      await closing;
      expect(response.status).toBe(503);
      expect(response.headers.get('retry-after')).toBe('1');
      expect(((await response.json()) as { error: unknown }).error).toEqual({
        code: 'service_unavailable',
        type: 'server_error',
        param: null,
        message: 'the call to anthropic was cut: the gateway is shutting down',
      });
      expect(h.recorder.entries).toEqual([]);
    } finally {
      await h.close();
    }
  });

  test('closes a connection still sending its request a second past the deadline', {
    timeout: 20_000,
  }, async () => {
    const h = await startHarness(limits);
    try {
      // A client sending its body slowly (or stalled): its request never reaches the provider, so
      // only closing its connection can end it.
      const socket = connect(Number(new URL(h.url).port), '127.0.0.1');
      const gone = once(socket, 'close');
      socket.write(
        'POST /v1/chat/completions HTTP/1.1\r\nhost: gateway\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{"model":',
      );
      const connections = promisify(h.app.server.getConnections.bind(h.app.server));
      await vi.waitFor(async () => expect(await connections()).toBe(1));
      const started = performance.now();
      await Promise.all([h.app.close(), gone]);
      // The deadline, the second given to answers to go out, and some slack. (Node stops enforcing
      // REQUEST_TIMEOUT_MS once the server closes.)
      expect(performance.now() - started).toBeLessThan(SHUTDOWN_TIMEOUT_MS + 1_000 + 1_500);
    } finally {
      await h.close();
    }
  });

  test('an answer whose usage record is still being written past the deadline still goes out before connections close', {
    timeout: 20_000,
  }, async () => {
    const h = await startHarness(limits);
    try {
      h.anthropic.script({ text: 'answered', usage: { input_tokens: 3 } });
      // The ledger is slow (a database coming back): the record lands 2 s in, past the deadline
      // and the second after it.
      const record = h.recorder.record.bind(h.recorder);
      h.recorder.record = async (entry) => {
        await new Promise((resolve) => setTimeout(resolve, 2_000));
        return record(entry);
      };
      const answer = chatRequest(h.url, false);
      await vi.waitFor(() => expect(h.anthropic.log).toHaveLength(1), { timeout: 15_000 });
      const closing = h.app.close();
      const response = await answer;
      await closing;
      // Billed, so answered: not cut off with its connection.
      expect(response.status).toBe(200);
      expect(
        ((await response.json()) as { choices: Array<{ message: { content: string } }> }).choices[0]!.message
          .content,
      ).toBe('answered');
      expect(h.recorder.entries).toHaveLength(1);
    } finally {
      await h.close();
    }
  });

  test('lets a request that ends before the deadline end as usual, and closes its connection', {
    timeout: 20_000,
  }, async () => {
    const h = await startHarness({ ...limits, shutdownTimeoutMs: 10_000 });
    try {
      h.anthropic.script({ text: ['a ', 'b'], usage: { input_tokens: 3 }, delayMs: 100 });
      let closing: Promise<void> | undefined;
      const response = await chatRequest(h.url, true);
      const events = await eventsOf(response.body!, () => {
        closing = h.app.close();
      });
      await closing;
      expect(events.at(-1)).toBe('[DONE]');
      expect(h.recorder.entries[0]!.usage).toMatchObject({ inputTokens: 3, exact: true });
    } finally {
      await h.close();
    }
  });
});

test('a provider call made after the cut (a request admitted before it) fails for the same reason', async () => {
  // Nothing listens there: the call must fail before any connection is tried.
  const upstream = createUpstream('anthropic', 'http://127.0.0.1:9', {
    connectMs: 1000,
    responseMs: 1000,
    completionMs: 1000,
  });
  await upstream.cut('the gateway is shutting down');
  const refused = await upstream
    .post({ path: '/v1/messages', headers: {}, body: {} })
    .catch((e: unknown) => e);
  expect(refused).toBeInstanceOf(UpstreamCutError);
  expect(refused).toMatchObject({ message: 'the call to anthropic was cut: the gateway is shutting down' });
  await upstream.close();
});
