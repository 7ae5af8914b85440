import { spawn } from 'node:child_process';
import { once } from 'node:events';

/** What a process printed, and its exit code (null when a signal ended it). */
export interface ProcessRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  cwd: string;
  /** Its whole environment: nothing of the test process's is added. */
  env: NodeJS.ProcessEnv;
  timeoutMs: number;
}

/**
 * Runs `command` to its end and collects what it printed. It starts in a process group of its own,
 * so one that outlives `timeoutMs` is killed with everything it started (npm's node child, a
 * script's curl), none of it left running after the test; the run then fails saying so.
 */
export async function runProcess(command: string, args: string[], options: RunOptions): Promise<ProcessRun> {
  const child = spawn(command, args, {
    cwd: options.cwd,
    env: options.env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => {
    stdout += chunk;
  });
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
  });
  let hung = false;
  const timer = setTimeout(() => {
    hung = true;
    killGroup(child.pid as number);
  }, options.timeoutMs);
  try {
    // 'close', not 'exit': all of its output is read, and a child it left holding the pipes counts as running.
    const [code] = (await once(child, 'close')) as [number | null];
    if (hung)
      throw new Error(
        `${[command, ...args].join(' ')} ran over ${options.timeoutMs} ms; its process group was killed\n` +
          `stdout:\n${stdout}\nstderr:\n${stderr}`,
      );
    return { code, stdout, stderr };
  } finally {
    clearTimeout(timer);
  }
}

function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch (error) {
    // Already gone between the timer and the kill.
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}
