import { request } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, beforeEach, describe, expect, test, vi } from 'vitest';
import { type Harness, startHarness } from './gateway-harness.js';

/** Upstream timeouts far beyond the waits below: any cancellation seen here is the client's doing. */
let h: Harness;
beforeAll(async () => {
  h = await startHarness({ upstreamTimeoutMs: 120_000 });
});
afterAll(() => h.close());
beforeEach(() => {
  h.recorder.entries.length = 0;
});

const WAIT = { timeout: 10_000 };

describe('a client that goes away', () => {
  test('mid-stream: the Anthropic call is cancelled and billed as far as Anthropic counted, not exact', async () => {
    h.anthropic.script({
      text: ['first ', 'second ', 'third'],
      usage: { input_tokens: 33, cache_read_input_tokens: 4, output_tokens: 50 },
      hangAfterEvents: 4, // message_start, content_block_start, ping, "first ", then silence
    });
    const stream = await h.client.chat.completions.create({
      model: 'anthropic/claude-sonnet-4.5',
      messages: [{ role: 'user', content: 'Count.' }],
      stream: true,
    });
    for await (const chunk of stream) if (chunk.choices[0]?.delta.content) break; // aborts the HTTP request

    const upstream = h.anthropic.log.at(-1)!;
    await vi.waitFor(() => expect(upstream.abortedAt).toBeDefined(), WAIT);
    await vi.waitFor(() => expect(h.recorder.entries).toHaveLength(1), WAIT);
    expect(h.recorder.entries[0]!.usage).toEqual({
      inputTokens: 33,
      cacheReadTokens: 4,
      cacheWriteTokens: 0,
      outputTokens: 1,
      reasoningTokens: 0,
      exact: false,
    });
    await vi.waitFor(() => expect(h.gate.released).toBe(h.gate.admitted.length), WAIT);
  });

  test('mid-stream on Gemini: usage of the last chunk that arrived', async () => {
    h.gemini.script({ text: ['one ', 'two ', 'three'], usage: { promptTokenCount: 21 }, hangAfterEvents: 2 });
    const stream = await h.client.chat.completions.create({
      model: 'google/gemini-2.5-flash',
      messages: [{ role: 'user', content: 'Count.' }],
      stream: true,
    });
    let text = '';
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      if (text === 'one two ') break;
    }
    const upstream = h.gemini.log.at(-1)!;
    await vi.waitFor(() => expect(upstream.abortedAt).toBeDefined(), WAIT);
    await vi.waitFor(() => expect(h.recorder.entries).toHaveLength(1), WAIT);
    expect(h.recorder.entries[0]!.usage).toMatchObject({ inputTokens: 21, outputTokens: 2, exact: false });
  });

  test('before a whole answer: the upstream call is cancelled; nothing is known, so nothing is recorded', async () => {
    h.anthropic.script({ hang: true });
    const before = h.anthropic.log.length;
    const controller = new AbortController();
    const pending = h.client.chat.completions
      .create(
        { model: 'anthropic/claude-sonnet-4.5', messages: [{ role: 'user', content: 'Slow.' }] },
        { signal: controller.signal },
      )
      .catch((error: unknown) => error);
    await vi.waitFor(() => expect(h.anthropic.log.length).toBe(before + 1), WAIT);
    controller.abort();
    expect(await pending).toBeInstanceOf(Error);

    const upstream = h.anthropic.log.at(-1)!;
    await vi.waitFor(() => expect(upstream.abortedAt).toBeDefined(), WAIT);
    await vi.waitFor(() => expect(h.gate.released).toBe(h.gate.admitted.length), WAIT);
    expect(h.recorder.entries).toEqual([]);
  });
});

describe('a client that reads slowly', () => {
  test('gets every byte of a large stream, in order, after pausing its socket', async () => {
    const pieces = Array.from({ length: 2000 }, (_, i) => `${String(i).padStart(4, '0')}${'x'.repeat(996)}`);
    h.anthropic.script({ text: pieces });
    const raw = await new Promise<string>((resolve, reject) => {
      const req = request(
        `${h.url}/v1/chat/completions`,
        { method: 'POST', headers: { 'content-type': 'application/json' } },
        (res) => {
          const chunks: Buffer[] = [];
          res.once('data', async (first: Buffer) => {
            chunks.push(first);
            res.pause(); // the kernel buffers fill, then the gateway's writes must wait
            await sleep(300);
            res.on('data', (chunk: Buffer) => chunks.push(chunk));
            res.resume();
          });
          res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(
        JSON.stringify({
          model: 'anthropic/claude-sonnet-4.5',
          messages: [{ role: 'user', content: 'Long.' }],
          stream: true,
        }),
      );
    });
    const events = raw.split('\n\n').filter((event) => event !== '');
    expect(events.at(-1)).toBe('data: [DONE]');
    const text = events
      .slice(0, -1)
      .map((event) => JSON.parse(event.slice(6)))
      .map((chunk) => chunk.choices[0]?.delta.content ?? '')
      .join('');
    expect(text).toBe(pieces.join(''));
  });
});
