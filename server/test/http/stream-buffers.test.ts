import { setTimeout as sleep } from 'node:timers/promises';
import { expect, test } from 'vitest';
import { type BufferedStream, StreamBuffers } from '../../src/http/event-stream.js';

/** A stream whose unread and taken bytes the test sets; it records its disconnection. */
function fakeStream(unread: number) {
  const stream = {
    unreadBytes: unread,
    takenBytes: 0,
    cut: undefined as string | undefined,
    unread: () => stream.unreadBytes,
    taken: () => stream.takenBytes,
    disconnect(reason: string) {
      stream.cut = reason;
    },
  };
  return stream satisfies BufferedStream;
}

/** Past the 20 ms between two sums of the budget. */
const nextCheck = () => sleep(25);

test('under the budget nothing is cut; over it, the stream holding the most', async () => {
  const buffers = new StreamBuffers(1000);
  const small = fakeStream(300);
  const large = fakeStream(600);
  buffers.add(small);
  buffers.add(large);
  buffers.enforce();
  expect([small.cut, large.cut]).toEqual([undefined, undefined]);
  small.unreadBytes = 500;
  await nextCheck();
  buffers.enforce();
  expect([small.cut, large.cut]).toEqual([undefined, 'buffer_budget']);
  expect(buffers.snapshot()).toEqual({ streams: 2, unreadBytes: 1100 });
});

/** Past the ten 10 ms ticks (turns of the loop) a client must have taken nothing for to count as idle. */
const idleTime = () => sleep(200);

test('a client still reading is spared while one that took nothing for a while holds less', async () => {
  const buffers = new StreamBuffers(1000);
  const reading = fakeStream(900);
  const stalled = fakeStream(200);
  buffers.add(reading);
  buffers.add(stalled);
  await idleTime();
  reading.takenBytes = 5000;
  buffers.enforce();
  expect([reading.cut, stalled.cut]).toEqual([undefined, 'buffer_budget']);
});

test('a client whose answer was silent a while (nothing waiting) is not idle when a burst arrives', async () => {
  const buffers = new StreamBuffers(1000);
  const silent = fakeStream(0);
  const stalled = fakeStream(400);
  buffers.add(silent);
  buffers.add(stalled);
  buffers.enforce();
  await idleTime();
  silent.unreadBytes = 700;
  buffers.enforce();
  expect([silent.cut, stalled.cut]).toEqual([undefined, 'buffer_budget']);
});

test('after the whole process paused (a long garbage collection), a client that was reading is not taken for idle', async () => {
  const buffers = new StreamBuffers(1000);
  const reading = fakeStream(0);
  const stalled = fakeStream(300);
  buffers.add(reading);
  buffers.add(stalled);
  await idleTime();
  reading.takenBytes = 50_000;
  reading.unreadBytes = 500;
  buffers.enforce();
  // Nothing of the loop runs for 150 ms: the client's socket could not drain meanwhile.
  const until = performance.now() + 150;
  while (performance.now() < until);
  reading.unreadBytes = 800;
  buffers.enforce();
  expect([reading.cut, stalled.cut]).toEqual([undefined, 'buffer_budget']);
});

test('a stream just opened is not idle yet, however much it holds', async () => {
  const buffers = new StreamBuffers(850);
  const stalled = fakeStream(100);
  buffers.add(stalled);
  await idleTime();
  const fresh = fakeStream(800);
  buffers.add(fresh);
  buffers.enforce();
  expect([stalled.cut, fresh.cut]).toEqual(['buffer_budget', undefined]);
});

test('idle streams are cut, largest first, until the rest fit; of streams still reading, one per check', async () => {
  const buffers = new StreamBuffers(450);
  const idle = [fakeStream(600), fakeStream(400), fakeStream(500)];
  for (const stream of idle) buffers.add(stream);
  await idleTime();
  buffers.enforce();
  expect(idle.map((stream) => stream.cut)).toEqual(['buffer_budget', undefined, 'buffer_budget']);

  const reading = [fakeStream(600), fakeStream(500)];
  const fresh = new StreamBuffers(450);
  for (const stream of reading) fresh.add(stream);
  fresh.enforce();
  expect(reading.map((stream) => stream.cut)).toEqual(['buffer_budget', undefined]);
});

test('a stream holding more than the whole budget by itself is judged at once, not at the end of the 20 ms', () => {
  const buffers = new StreamBuffers(1000);
  const stream = fakeStream(10);
  buffers.add(stream);
  buffers.enforce(10);
  stream.unreadBytes = 1500;
  buffers.enforce(1500);
  expect(stream.cut).toBe('buffer_budget');
});

test('checks skipped within 20 ms are made at its end', async () => {
  const buffers = new StreamBuffers(1000);
  const stream = fakeStream(10);
  buffers.add(stream);
  buffers.enforce();
  stream.unreadBytes = 2000;
  buffers.enforce();
  expect(stream.cut).toBeUndefined();
  await nextCheck();
  expect(stream.cut).toBe('buffer_budget');
});
