import { type ClientRequest, type IncomingMessage, request } from 'node:http';
import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, test, vi } from 'vitest';
import { sampleValue, scrapeMetrics } from '../observability/prometheus-text.js';
import { startHarness, useHarness } from './gateway-harness.js';

/** Short upstream timeouts: once its client left, nothing else ends a provider's call. */
const UPSTREAM_TIMEOUT_MS = 1_000;
const COMPLETION_TIMEOUT_MS = 1_500;
const h = useHarness({
  upstreamTimeoutMs: UPSTREAM_TIMEOUT_MS,
  upstreamCompletionTimeoutMs: COMPLETION_TIMEOUT_MS,
});

const WAIT = { timeout: 10_000 };

/** A non-streamed request whose client leaves once Anthropic has it, before the answer. */
async function leaveBeforeTheAnswer(): Promise<void> {
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
}

describe('a client that goes away', () => {
  test('mid-stream: the answer is read to its end (the provider bills it all) and billed exactly', async () => {
    h.anthropic.script({
      text: ['first ', 'second ', 'third'],
      usage: { input_tokens: 33, output_tokens: 50 },
      delayMs: 30,
    });
    const stream = await h.client.chat.completions.create({
      model: 'anthropic/claude-sonnet-4.5',
      messages: [{ role: 'user', content: 'Count.' }],
      stream: true,
    });
    for await (const chunk of stream) if (chunk.choices[0]?.delta.content) break; // aborts the HTTP request

    await vi.waitFor(() => expect(h.recorder.entries).toHaveLength(1), WAIT);
    expect(h.recorder.entries[0]!.usage).toMatchObject({ inputTokens: 33, outputTokens: 50, exact: true });
    expect(h.anthropic.log.at(-1)!.abortedAt).toBeUndefined();
    await vi.waitFor(() => expect(h.gate.released).toBe(h.gate.admitted.length), WAIT);
  });

  test('before its stream opened (a model thinking first): the answer is read to its end and billed exactly', async () => {
    h.anthropic.script({ text: ['late'], usage: { input_tokens: 7, output_tokens: 1 }, delayMs: 300 });
    const before = h.anthropic.log.length;
    const controller = new AbortController();
    const pending = fetch(`${h.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'anthropic/claude-sonnet-4.5',
        messages: [{ role: 'user', content: 'Think.' }],
        stream: true,
      }),
      signal: controller.signal,
    }).catch((error: unknown) => error);
    await vi.waitFor(() => expect(h.anthropic.log.length).toBe(before + 1), WAIT);
    controller.abort(); // within the second the stream waits for its first part
    expect(await pending).toBeInstanceOf(Error);
    await vi.waitFor(() => expect(h.recorder.entries).toHaveLength(1), WAIT);
    expect(h.recorder.entries[0]!.usage).toMatchObject({ inputTokens: 7, outputTokens: 1, exact: true });
    await vi.waitFor(() => expect(h.gate.released).toBe(h.gate.admitted.length), WAIT);
  });

  test('a gateway closing while an answer is read on after its client left waits for it to be billed', async () => {
    const own = await startHarness();
    try {
      // A ledger write that takes a while: closing must wait for it, not just for the provider.
      const record = own.recorder.record.bind(own.recorder);
      own.recorder.record = async (entry) => {
        await sleep(300);
        return record(entry);
      };
      own.anthropic.script({
        text: ['a ', 'b ', 'c ', 'd'],
        usage: { input_tokens: 9, output_tokens: 4 },
        delayMs: 100,
      });
      const stream = await own.client.chat.completions.create({
        model: 'anthropic/claude-sonnet-4.5',
        messages: [{ role: 'user', content: 'Count.' }],
        stream: true,
      });
      for await (const chunk of stream) if (chunk.choices[0]?.delta.content) break;
      await vi.waitFor(() => expect(own.gate.admitted.length).toBe(1), WAIT);
      await own.app.close();
      expect(own.recorder.entries.map((entry) => entry.usage)).toMatchObject([
        { outputTokens: 4, exact: true },
      ]);
    } finally {
      await own.close();
    }
  });

  test('mid-stream, an upstream that goes silent: cut by its own timeout, billed as far as Anthropic counted, not exact', async () => {
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
    // No message_delta came to state the output: "first " is 6 bytes, 2 tokens at 4 bytes a token.
    expect(h.recorder.entries[0]!.usage).toEqual({
      inputTokens: 33,
      cacheReadTokens: 4,
      cacheWriteTokens: 0,
      outputTokens: 2,
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

  test('before a whole answer: it is waited for and recorded, exactly', async () => {
    h.anthropic.script({ text: 'late', usage: { input_tokens: 12, output_tokens: 7 }, delayMs: 300 });
    await leaveBeforeTheAnswer();

    await vi.waitFor(() => expect(h.recorder.entries).toHaveLength(1), WAIT);
    expect(h.recorder.entries[0]!.usage).toMatchObject({ inputTokens: 12, outputTokens: 7, exact: true });
    expect(h.anthropic.log.at(-1)!.abortedAt).toBeUndefined();
  });

  test('before a whole answer that never comes: cut at UPSTREAM_TIMEOUT_MS; nothing is known, so nothing is recorded', async () => {
    h.anthropic.script({ hang: true });
    await leaveBeforeTheAnswer();

    const upstream = h.anthropic.log.at(-1)!;
    await vi.waitFor(() => expect(upstream.abortedAt).toBeDefined(), WAIT);
    await vi.waitFor(() => expect(h.gate.released).toBe(h.gate.admitted.length), WAIT);
    expect(h.recorder.entries).toEqual([]);
  });
});

describe('a client that goes away while its request waits for admission', () => {
  test('is not forwarded, owes nothing, and its slot is given back', async () => {
    const admit = h.gate.admit.bind(h.gate);
    let admitNow = () => {};
    const admitted = new Promise<void>((resolve) => {
      admitNow = resolve;
    });
    // Its payer's settlement is under way: admission waits.
    h.gate.admit = async (request) => {
      await admitted;
      return admit(request);
    };
    try {
      const calls = h.anthropic.log.length;
      const controller = new AbortController();
      const pending = h.client.chat.completions
        .create(
          {
            model: 'anthropic/claude-sonnet-4.5',
            messages: [{ role: 'user', content: 'Wait.' }],
            stream: true,
          },
          { signal: controller.signal },
        )
        .catch((error: unknown) => error);
      await sleep(100);
      controller.abort();
      expect(await pending).toBeInstanceOf(Error);
      await sleep(100);
      admitNow();
      await vi.waitFor(() => expect(h.gate.released).toBe(h.gate.admitted.length), WAIT);
      expect(h.gate.admitted.length).toBeGreaterThan(0);
      await sleep(100);
      expect(h.anthropic.log.length).toBe(calls);
      expect(h.recorder.entries).toEqual([]);
    } finally {
      h.gate.admit = admit;
    }
  });
});

/** A streamed request for a long answer, its response handed to `onResponse` as it begins. */
function streamLong(onResponse: (res: IncomingMessage) => void, url = h.url): ClientRequest {
  const req = request(
    `${url}/v1/chat/completions`,
    { method: 'POST', headers: { 'content-type': 'application/json' } },
    onResponse,
  );
  req.end(
    JSON.stringify({
      model: 'anthropic/claude-sonnet-4.5',
      messages: [{ role: 'user', content: 'Long.' }],
      stream: true,
    }),
  );
  return req;
}

/**
 * A long stream whose client takes its first bytes, then nothing until `resume`; `received` is all
 * it got once its response ended or broke.
 */
function readFirstBytesOnly(url = h.url): { received: Promise<string>; resume: () => void } {
  let resume = () => {};
  const received = new Promise<string>((resolve) => {
    streamLong((res) => {
      const chunks: Buffer[] = [];
      res.once('data', (first: Buffer) => {
        chunks.push(first);
        res.pause();
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
      });
      resume = () => res.resume();
      const done = () => resolve(Buffer.concat(chunks).toString('utf8'));
      res.on('end', done);
      res.on('error', done);
    }, url).on('error', () => resolve(''));
  });
  return { received, resume: () => resume() };
}

describe('a client that reads slowly', () => {
  test('gets every byte of a large stream, in order, after pausing its socket', async () => {
    const pieces = Array.from({ length: 2000 }, (_, i) => `${String(i).padStart(4, '0')}${'x'.repeat(996)}`);
    h.anthropic.script({ text: pieces });
    const raw = await new Promise<string>((resolve, reject) => {
      streamLong((res) => {
        const chunks: Buffer[] = [];
        res.once('data', async (first: Buffer) => {
          chunks.push(first);
          res.pause(); // the kernel buffers fill, then the gateway buffers what it writes
          await sleep(300);
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.resume();
        });
        res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
        res.on('error', reject);
      }).on('error', reject);
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

  test('one that stops reading does not hold its answer back: it is read to its end and billed exactly, its slot given back, and the client is cut off', async () => {
    // More than the kernel's socket buffers take, and than the gateway keeps unread for a client.
    const pieces = Array.from(
      { length: 20_000 },
      (_, i) => `${String(i).padStart(5, '0')}${'x'.repeat(995)}`,
    );
    h.anthropic.script({ text: pieces, usage: { input_tokens: 5, output_tokens: 20_000 } });
    const before = h.gate.admitted.length;
    const { received, resume } = readFirstBytesOnly();
    await vi.waitFor(() => expect(h.gate.released).toBe(before + 1), WAIT);
    expect(h.recorder.entries.map((entry) => entry.usage)).toMatchObject([
      { outputTokens: 20_000, exact: true },
    ]);
    // Read at last: what the kernel held, then the end of a connection the gateway dropped.
    resume();
    const raw = await received;
    expect(raw.length).toBeGreaterThan(0);
    expect(raw.endsWith('data: [DONE]\n\n')).toBe(false);
  });

  test('one that reads slowly but steadily is never cut off, however long its backlog lasts', async () => {
    const pieces = Array.from({ length: 4000 }, (_, i) => `${String(i).padStart(4, '0')}${'x'.repeat(996)}`);
    h.anthropic.script({ text: pieces, usage: { input_tokens: 5, output_tokens: 4000 } });
    const started = Date.now();
    const raw = await new Promise<string>((resolve, reject) => {
      streamLong((res) => {
        const chunks: Buffer[] = [];
        // About 0.8 MB/s: slower than the gateway writes, never stopping for long.
        res.on('data', (chunk: Buffer) => {
          chunks.push(chunk);
          res.pause();
          setTimeout(() => res.resume(), 80);
        });
        res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
        res.on('error', reject);
      }).on('error', reject);
    });
    expect(Date.now() - started).toBeGreaterThan(UPSTREAM_TIMEOUT_MS);
    expect(raw.endsWith('data: [DONE]\n\n')).toBe(true);
  });
  test('one reading along gets an event larger than what a client may leave unread whole', async () => {
    const huge = `${'z'.repeat(3_000_000)}é${'z'.repeat(2_999_999)}`; // 6 MB in one event, a 2-byte character in it
    h.anthropic.script({ text: [huge], usage: { input_tokens: 5, output_tokens: 1 } });
    const raw = await new Promise<string>((resolve, reject) => {
      streamLong((res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
        res.on('error', reject);
      }).on('error', reject);
    });
    expect(raw.endsWith('data: [DONE]\n\n')).toBe(true);
    const text = raw
      .split('\n\n')
      .filter((event) => event.startsWith('data: {'))
      .map((event) => JSON.parse(event.slice(6)).choices[0]?.delta.content ?? '')
      .join('');
    expect(text).toBe(huge);
  });

  test('one that takes nothing of an answer that has ended, but waits in the response, is cut off all the same', async () => {
    // One event of 20 MB: far past what the kernel takes (4 MB of send buffer here, and what the
    // client read before it paused), the stream ends with the rest waiting in the response.
    h.anthropic.script({ text: ['y'.repeat(20_000_000)], usage: { input_tokens: 5, output_tokens: 1 } });
    const cutOff = async () => {
      const exposition = await scrapeMetrics(h.url);
      const count = (reason: string) =>
        sampleValue(exposition, 'paygate_stream_disconnects_total', { reason }) ?? 0;
      return count('stalled') + count('unread');
    };
    const unfinished = async () =>
      sampleValue(await scrapeMetrics(h.url), 'paygate_http_requests_total', {
        route: '/v1/chat/completions',
        status: '499',
      }) ?? 0;
    const before = { cut: await cutOff(), released: h.gate.released, unfinished: await unfinished() };
    const { received, resume } = readFirstBytesOnly();
    await vi.waitFor(async () => expect(await cutOff()).toBe(before.cut + 1), WAIT);
    await vi.waitFor(() => expect(h.gate.released).toBe(before.released + 1), WAIT);
    expect(h.recorder.entries.map((entry) => entry.usage)).toMatchObject([{ outputTokens: 1, exact: true }]);
    resume();
    expect((await received).endsWith('data: [DONE]\n\n')).toBe(false);
    const open = async () => sampleValue(await scrapeMetrics(h.url), 'paygate_streams_open');
    await vi.waitFor(async () => expect(await open()).toBe(0), WAIT);
    // Counted among the requests, as one whose response did not finish.
    expect(await unfinished()).toBe(before.unfinished + 1);
  });
});

describe('streams that together hold more than STREAM_BUFFER_BUDGET_BYTES unread', () => {
  test('the one holding the most is cut off (and billed exactly), while a client reading along gets its whole answer', async () => {
    const own = await startHarness({ streamBufferBudgetBytes: 1024 * 1024 });
    try {
      // The client reading along: an answer paced over seconds, which it reads as it comes.
      const paced = Array.from(
        { length: 1500 },
        (_, i) => `b${String(i).padStart(5, '0')}${'x'.repeat(494)}`,
      );
      // The one left unread: 12 MB at once, far past the budget (1 MiB); its own cap is 4 MiB.
      const burst = Array.from(
        { length: 12_000 },
        (_, i) => `a${String(i).padStart(5, '0')}${'x'.repeat(994)}`,
      );
      own.anthropic.script(
        { text: paced, usage: { input_tokens: 5, output_tokens: 1500 }, delayMs: 2 },
        { text: burst, usage: { input_tokens: 5, output_tokens: 12_000 } },
      );
      let readingEnded = false;
      const read = new Promise<string>((resolve, reject) => {
        streamLong((res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => {
            readingEnded = true;
            resolve(Buffer.concat(chunks).toString('utf8'));
          });
          res.on('error', reject);
        }, own.url).on('error', reject);
      });
      await vi.waitFor(() => expect(own.anthropic.log).toHaveLength(1), WAIT);
      // Its client takes the first bytes, then nothing until the gateway has cut it off.
      const { received, resume } = readFirstBytesOnly(own.url);
      const disconnects = async (reason: string) =>
        sampleValue(await scrapeMetrics(own.url), 'paygate_stream_disconnects_total', { reason });
      await vi.waitFor(async () => expect(await disconnects('buffer_budget')).toBe(1), WAIT);
      // Over the budget while the other was still being read, and that one went on to its end.
      expect(readingEnded).toBe(false);
      const answer = await read;
      expect(answer.endsWith('data: [DONE]\n\n')).toBe(true);
      expect(answer).toContain('b01499');
      expect(await disconnects('buffer_budget')).toBe(1);
      expect(await disconnects('unread')).toBeUndefined();
      // Read at last: what the kernel held, then the end of a connection the gateway dropped.
      resume();
      expect((await received).endsWith('data: [DONE]\n\n')).toBe(false);
      await vi.waitFor(() => expect(own.recorder.entries).toHaveLength(2), WAIT);
      expect(own.recorder.entries.map((entry) => entry.usage.outputTokens).sort((a, b) => a - b)).toEqual([
        1500, 12_000,
      ]);
      expect(own.recorder.entries.every((entry) => entry.usage.exact)).toBe(true);
    } finally {
      await own.close();
    }
  });
});

describe('streams pipelined on one connection', () => {
  const metric = async (name: string) => sampleValue(await scrapeMetrics(h.url), name);

  test('fifteen at once are all answered, and Node warns of no listener leak', async () => {
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    try {
      const body = JSON.stringify({
        model: 'anthropic/claude-sonnet-4.5',
        messages: [{ role: 'user', content: 'Pipelined.' }],
        stream: true,
      });
      const post = `POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
      const recorded = h.recorder.entries.length;
      const socket = connect(Number(new URL(h.url).port), '127.0.0.1');
      let answers = '';
      socket.on('data', (chunk) => {
        answers += chunk;
      });
      socket.write(post.repeat(15));
      await vi.waitFor(() => expect(answers.split('data: [DONE]').length - 1).toBe(15), WAIT);
      socket.destroy();
      expect(h.recorder.entries.length - recorded).toBe(15);
      // Warnings are emitted on the next tick.
      await sleep(10);
      expect(warnings.filter((warning) => warning.name === 'MaxListenersExceededWarning')).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });

  test('a client closing its connection during the first: both are read to their end and billed, and no stream stays open', async () => {
    h.anthropic.script(
      {
        text: ['one ', 'two ', 'three ', 'four'],
        usage: { input_tokens: 3, output_tokens: 4 },
        delayMs: 150,
      },
      // Past what a response without a socket buffers (16 KiB): the rest waits in the gateway.
      {
        text: Array.from({ length: 200 }, () => 'q'.repeat(1000)),
        usage: { input_tokens: 5, output_tokens: 200 },
      },
    );
    const calls = h.anthropic.log.length;
    const admitted = h.gate.admitted.length;
    const body = JSON.stringify({
      model: 'anthropic/claude-sonnet-4.5',
      messages: [{ role: 'user', content: 'Pipelined.' }],
      stream: true,
    });
    const post = `POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    const socket = connect(Number(new URL(h.url).port), '127.0.0.1');
    socket.on('error', () => {});
    socket.write(post + post);
    // The first answer has begun: the client leaves with both requests in flight.
    await new Promise((resolve) => socket.once('data', resolve));
    await vi.waitFor(() => expect(h.anthropic.log.length).toBe(calls + 2), WAIT);
    socket.destroy();

    await vi.waitFor(() => expect(h.recorder.entries).toHaveLength(2), WAIT);
    // Both run at once; the second's answer waited behind the first's, which never ended.
    const usages = h.recorder.entries.map((entry) => entry.usage);
    expect(usages.sort((a, b) => a.inputTokens - b.inputTokens)).toMatchObject([
      { inputTokens: 3, outputTokens: 4, exact: true },
      { inputTokens: 5, outputTokens: 200, exact: true },
    ]);
    await vi.waitFor(() => expect(h.gate.released).toBe(admitted + 2), WAIT);
    await vi.waitFor(async () => expect(await metric('paygate_streams_open')).toBe(0), WAIT);
    expect(await metric('paygate_stream_unread_bytes')).toBe(0);
  });
});
