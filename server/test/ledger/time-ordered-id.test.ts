import { validate, version } from 'uuid';
import { expect, test, vi } from 'vitest';
import { timeOrderedId } from '../../src/store/time-ordered-id.js';

const issueTime = (id: string) => Number.parseInt(id.replace(/-/g, '').slice(0, 12), 16);

test('ids are version-7 UUIDs, distinct, and sort in issue order within and across milliseconds', () => {
  // Thousands within each millisecond, across several refills of the random pool (256 ids each).
  const ids = Array.from({ length: 20_000 }, () => timeOrderedId());
  for (const id of ids.slice(0, 600)) {
    expect(validate(id)).toBe(true);
    expect(version(id)).toBe(7);
  }
  expect(new Set(ids).size).toBe(ids.length);
  expect([...ids].sort()).toEqual(ids);
});

test('their first 48 bits are the issue time; a clock going back does not break the order', () => {
  const before = Date.now();
  const id = timeOrderedId();
  expect(issueTime(id)).toBeGreaterThanOrEqual(before);
  expect(issueTime(id)).toBeLessThanOrEqual(Date.now());

  const clock = vi.spyOn(Date, 'now').mockReturnValue(before - 60_000);
  try {
    const later = [timeOrderedId(), timeOrderedId()];
    expect([id, ...later].sort()).toEqual([id, ...later]);
    expect(issueTime(later[1] as string)).toBe(issueTime(id));
  } finally {
    clock.mockRestore();
  }
});

test('the random part differs from id to id within one millisecond', () => {
  const clock = vi.spyOn(Date, 'now').mockReturnValue(Date.now() + 1_000);
  try {
    const tails = Array.from({ length: 1_000 }, () => timeOrderedId().slice(-12));
    expect(new Set(tails).size).toBe(tails.length);
  } finally {
    clock.mockRestore();
  }
});
