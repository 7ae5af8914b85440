import { tmpdir } from 'node:os';
import { expect, test } from 'vitest';
import { alive } from '../devkit/processes.js';
import { runProcess } from './run-process.js';

const options = { cwd: tmpdir(), env: { PATH: process.env.PATH }, timeoutMs: 10_000 };

test('resolves with the exit code and what the process printed', async () => {
  await expect(runProcess('bash', ['-c', 'echo out; echo err >&2; exit 3'], options)).resolves.toEqual({
    code: 3,
    stdout: 'out\n',
    stderr: 'err\n',
  });
});

test('a process that outlives timeoutMs fails the run, killed with what it started', async () => {
  // The script starts a sleep of its own and prints its pid, then waits on it.
  const run = runProcess('bash', ['-c', 'sleep 60 & echo $!; wait'], { ...options, timeoutMs: 500 });
  const error = (await run.catch((failure: unknown) => failure)) as Error;
  expect(error).toBeInstanceOf(Error);
  expect(error.message).toMatch(
    /^bash -c sleep 60 & echo \$!; wait ran over 500 ms; its process group was killed/,
  );
  const sleeper = Number(/stdout:\n(\d+)/.exec(error.message)?.[1]);
  expect(sleeper).toBeGreaterThan(0);
  // Killed, though init may take a moment to reap it.
  const deadline = Date.now() + 5_000;
  while (alive(sleeper) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
  expect(alive(sleeper)).toBe(false);
}, 15_000);
