import { expect, test } from 'vitest';
import type { AnthropicStep } from '../../devkit/simulators/anthropic.js';
import type { ProbedAnswer } from '../support/ordering-probe.js';
import { useFaultStack } from './harness.js';

// The provider fails in every way it can (5xx, no answer, a stream that stalls, is reset, or
// reports an error) between paying requests of one payer, a gateway process in front of it.
const stack = useFaultStack();

const usage = { input_tokens: 10, output_tokens: 2 };
const pieces = ['one ', 'two ', 'three ', 'four ', 'five'];

interface Case {
  name: string;
  step: AnthropicStep;
  stream: boolean;
  /** What the client sees: status, then the error code, or `stream error` for a broken stream. */
  seen: string;
  /**
   * Whether a usage record is written: a stream the provider began and that broke off is billed for
   * what it counted; one ended by an error the provider reported before any text is not (nor charged
   * by the provider).
   */
  recorded: boolean;
}

const cases: Case[] = [
  { name: 'answered', step: { text: 'first', usage }, stream: false, seen: '200', recorded: true },
  {
    name: '500',
    step: { httpError: { status: 500 } },
    stream: false,
    seen: '502 provider_error',
    recorded: false,
  },
  {
    name: '529 overloaded',
    step: { httpError: { status: 529 } },
    stream: true,
    seen: '503 provider_overloaded',
    recorded: false,
  },
  { name: 'no answer', step: { hang: true }, stream: false, seen: '504 provider_error', recorded: false },
  { name: 'answered', step: { text: pieces, usage }, stream: true, seen: '200', recorded: true },
  {
    name: 'error event before any text',
    step: { text: pieces, usage, failAfterEvents: 3 },
    stream: true,
    seen: '503 provider_overloaded',
    recorded: false,
  },
  {
    name: 'stalls mid-stream',
    step: { text: pieces, usage, hangAfterEvents: 4 },
    stream: true,
    seen: '200 stream error',
    recorded: true,
  },
  {
    name: 'reset mid-stream',
    step: { text: pieces, usage, resetAfterEvents: 4, delayMs: 20 },
    stream: true,
    seen: '200 stream error',
    recorded: true,
  },
  {
    name: 'error event mid-stream',
    step: { text: pieces, usage, failAfterEvents: 4 },
    stream: true,
    seen: '200 stream error',
    recorded: true,
  },
  { name: 'answered last', step: { text: 'last', usage }, stream: false, seen: '200', recorded: true },
];

test('provider failures: every request waits for the debt before it, what was used is billed, paid once', async () => {
  const { probe, anthropic, store } = stack;
  const payer = await stack.sessionPayer(0);
  const client = payer.client();
  const answers: ProbedAnswer[] = [];
  for (const { step, stream } of cases) {
    anthropic.script(step);
    answers.push(await probe.chat(client, payer.address, { stream }));
  }
  expect(
    answers.map((answer, i) => {
      const seen = answer.streamError
        ? '200 stream error'
        : [answer.status, answer.code].filter(Boolean).join(' ');
      return `${cases[i]!.name}: ${seen}`;
    }),
  ).toEqual(cases.map((c) => `${c.name}: ${c.seen}`));
  // The ordering rule held for each of them, broken streams' records included.
  expect(probe.violations).toEqual([]);

  const records = await store.db
    .selectFrom('usage_records as u')
    .leftJoin('settlements as s', 's.id', 'u.settlement_id')
    .select(['u.request_id', 'u.total_pico', 'u.exact', 'u.input_tokens', 's.status'])
    .where('u.payer', '=', payer.address)
    .execute();
  const byRequest = new Map(records.map((record) => [record.request_id, record]));
  expect(
    answers.map((answer, i) => ({
      case: cases[i]!.name,
      recorded: byRequest.has(answer.requestId as string),
    })),
  ).toEqual(cases.map((c) => ({ case: c.name, recorded: c.recorded })));
  expect(records).toHaveLength(cases.filter((c) => c.recorded).length);
  for (const [i, answer] of answers.entries()) {
    const record = byRequest.get(answer.requestId as string);
    if (!record) continue;
    // A broken stream is billed for the input the provider reported, flagged as not exact.
    expect(record.input_tokens).toBe(10n);
    expect(record.exact).toBe(cases[i]!.seen === '200' ? 1n : 0n);
    if (answer.totalPicoUsd !== undefined) expect(record.total_pico).toBe(answer.totalPicoUsd);
    // Everything before the last request was paid before it went out; the last one is owed.
    expect(record.status).toBe(i === answers.length - 1 ? null : 'confirmed');
  }
  await stack.expectLedgerMatchesChain([payer.address]);
});
