import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';

const SERVER_DIR = fileURLToPath(new URL('../..', import.meta.url));

/** What `npm run reconcile` printed, and its exit code (0 consistent, 1 mismatches, 2 could not run). */
export interface ReconcileRun {
  code: number;
  stdout: string;
  /** Without npm's own warnings. */
  stderr: string;
}

/** `npm run reconcile` as an operator runs it: a process of its own with exactly `env` (plus PATH and HOME). */
export async function runReconcileCommand(
  env: Record<string, string>,
  args: string[] = [],
): Promise<ReconcileRun> {
  const child = spawn('npm', ['run', '--silent', 'reconcile', '--', ...args], {
    cwd: SERVER_DIR,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    // Its own process group: a command that never exits is killed with npm's node child.
    detached: true,
  });
  const hung = setTimeout(() => process.kill(-(child.pid as number), 'SIGKILL'), 30_000);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => {
    stdout += chunk;
  });
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
  });
  const [code] = await once(child, 'exit');
  clearTimeout(hung);
  return { code: code as number, stdout, stderr: stderr.replace(/^npm warn .*\n/gm, '') };
}
