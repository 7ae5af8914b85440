import { fileURLToPath } from 'node:url';
import { type ProcessRun, runProcess } from './run-process.js';

const SERVER_DIR = fileURLToPath(new URL('../..', import.meta.url));

/**
 * What `npm run reconcile` printed (stderr without npm's own warnings), and its exit code
 * (0 consistent, 1 mismatches, 2 could not run).
 */
export type ReconcileRun = ProcessRun;

/** `npm run reconcile` as an operator runs it: a process of its own with exactly `env` (plus PATH and HOME). */
export async function runReconcileCommand(
  env: Record<string, string>,
  args: string[] = [],
): Promise<ReconcileRun> {
  const run = await runProcess('npm', ['run', '--silent', 'reconcile', '--', ...args], {
    cwd: SERVER_DIR,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
    timeoutMs: 30_000,
  });
  return { ...run, stderr: run.stderr.replace(/^npm warn .*\n/gm, '') };
}
