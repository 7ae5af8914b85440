import { expect, test } from 'vitest';
import { loadCatalog } from '../../src/catalog/catalog.js';
import { anthropicFamily } from '../../src/providers/anthropic/anthropic.js';
import { familyAdapter } from '../../src/providers/provider-family.js';
import { ProviderError, type StreamPart } from '../../src/providers/types.js';
import type { Upstream } from '../../src/providers/upstream.js';

const model = loadCatalog().find('anthropic/claude-sonnet-5.5');
if (!model) throw new Error('the shipped catalog lost its Claude model');

const frame = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
const delta = (text: string) =>
  frame('content_block_delta', {
    type: 'content_block_delta',
    index: 0,
    delta: { type: 'text_delta', text },
  });
const opening = [
  frame('message_start', {
    type: 'message_start',
    message: { id: 'msg_1', usage: { input_tokens: 4, output_tokens: 1 } },
  }),
  frame('content_block_start', {
    type: 'content_block_start',
    index: 0,
    content_block: { type: 'text', text: '' },
  }),
];

/** The adapter on an upstream whose body arrives in the given reads. */
async function streamOf(...reads: string[]) {
  const upstream: Upstream = {
    post: async () => ({
      async *[Symbol.asyncIterator]() {
        for (const read of reads) yield new TextEncoder().encode(read);
      },
    }),
    failure: (error) =>
      error instanceof ProviderError ? error : new ProviderError(String(error), undefined),
    close: async () => {},
    cut: async () => 0,
  };
  const adapter = familyAdapter('anthropic', anthropicFamily('key'), upstream);
  const call = {
    model: model as NonNullable<typeof model>,
    request: { messages: [{ role: 'user' as const, content: 'hi' }], stream: true },
    signal: new AbortController().signal,
    requestId: 'req-1',
  };
  const batches: StreamPart[][] = [];
  let failure: unknown;
  try {
    for await (const batch of await adapter.prepareStream(call)({ outputTokens: 64 })) batches.push(batch);
  } catch (error) {
    failure = error;
  }
  return { batches, failure };
}

test('the events one read brings come as one batch, in order; an event split across reads waits for its end', async () => {
  const end = [
    frame('content_block_stop', { type: 'content_block_stop', index: 0 }),
    frame('message_delta', {
      type: 'message_delta',
      delta: { stop_reason: 'end_turn' },
      usage: { output_tokens: 3 },
    }),
    frame('message_stop', { type: 'message_stop' }),
  ].join('');
  const split = delta('three');
  const { batches, failure } = await streamOf(
    [...opening, delta('one '), delta('two ')].join(''),
    split.slice(0, 20),
    split.slice(20) + end,
  );
  expect(failure).toBeUndefined();
  expect(batches).toEqual([
    [
      { type: 'delta', content: 'one ' },
      { type: 'delta', content: 'two ' },
    ],
    [
      { type: 'delta', content: 'three' },
      { type: 'finish', finishReason: 'stop' },
    ],
  ]);
});

test('an error event in the middle of a read: the parts before it still come, then the error', async () => {
  const error = frame('error', { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } });
  const { batches, failure } = await streamOf([...opening, delta('one '), error, delta('never')].join(''));
  expect(batches).toEqual([[{ type: 'delta', content: 'one ' }]]);
  expect(failure).toBeInstanceOf(ProviderError);
  expect((failure as ProviderError).message).toContain('Overloaded');
});
