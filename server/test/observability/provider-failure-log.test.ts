import { setTimeout as sleep } from 'node:timers/promises';
import { expect, test } from 'vitest';
import { useFaultStack } from '../faults/harness.js';

// A gateway process (its JSON log read line by line) whose provider fails a paid chat request: the
// error line about that failure names the request, as its x-request-id header does.
const stack = useFaultStack();

/** The gateway's log lines of a request, once its last one (`request completed`) is written. */
async function linesOf(reqId: string, timeoutMs = 10_000): Promise<Array<Record<string, unknown>>> {
  const deadline = Date.now() + timeoutMs;
  const lines = () => stack.gateway.logs.filter((log) => log.reqId === reqId);
  // The log is written off the event loop, a few kilobytes or some milliseconds at a time.
  while (!lines().some((log) => log.msg === 'request completed') && Date.now() < deadline) await sleep(20);
  return lines();
}

test("a provider's 5xx: the error log line about it carries the request id of the answer", async () => {
  const payer = await stack.sessionPayer(0);
  stack.anthropic.script({ httpError: { status: 500, message: 'simulated upstream failure' } });
  const answer = await stack.probe.chat(payer.client(), payer.address);
  expect(`${answer.status} ${answer.code}`).toBe('502 provider_error');
  const reqId = answer.headers.get('x-request-id');
  expect(reqId).toMatch(/^[0-9a-f-]{36}$/);

  const lines = await linesOf(reqId as string);
  expect(lines.map((log) => `${log.level} ${log.msg}`)).toEqual([
    '50 request failed',
    '30 request completed',
  ]);
  // The error line is about the provider's failure: its status and message, as the client is told.
  expect(lines[0]).toMatchObject({
    reqId,
    err: {
      code: 'provider_error',
      message: 'anthropic answered 500: simulated upstream failure',
    },
  });
});
