import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

export const SERVER_DIR = fileURLToPath(new URL('..', import.meta.url));

const children = new Set<ChildProcess>();
// Whatever happens to the benchmark, the processes it started do not outlive it.
process.on('exit', () => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
});

export interface TsProcess {
  child: ChildProcess;
  /** Every stdout line so far. */
  lines: string[];
  /** Resolves with the first stdout line that is JSON; rejects if the process exits first. */
  firstJson<T>(): Promise<T>;
  /** Resolves with the last stdout line as JSON once the process exited 0. */
  result<T>(): Promise<T>;
  stop(): Promise<void>;
}

export interface ProcessOptions {
  env?: Record<string, string | undefined>;
  /** Node flags before the entry point (e.g. --cpu-prof). */
  nodeOptions?: string[];
  /** Where stdout goes: read line by line (default), or a file descriptor (a log file). */
  stdout?: number;
}

/** A TypeScript entry point of the server package, run through tsx, in a process of its own. */
export function startTs(entry: string, args: string[] = [], options: ProcessOptions = {}): TsProcess {
  return startNode(['--import', 'tsx', entry], args, options);
}

/** `node <entry...> <args>` in the server package, in a process of its own (stderr passes through). */
export function startNode(entry: string[], args: string[] = [], options: ProcessOptions = {}): TsProcess {
  const child = spawn(process.execPath, [...(options.nodeOptions ?? []), ...entry, ...args], {
    cwd: SERVER_DIR,
    env: { PATH: process.env.PATH, DO_NOT_TRACK: '1', ...options.env },
    stdio: ['ignore', options.stdout ?? 'pipe', 'inherit'],
  });
  children.add(child);
  const exited = once(child, 'exit').then(([code]) => {
    children.delete(child);
    return code as number | null;
  });
  const lines: string[] = [];
  const waiters: Array<() => void> = [];
  if (child.stdout)
    createInterface({ input: child.stdout }).on('line', (line) => {
      lines.push(line);
      for (const waiter of waiters.splice(0)) waiter();
    });
  const parsed = () => lines.flatMap((line) => (line.startsWith('{') ? [JSON.parse(line)] : []));
  return {
    child,
    lines,
    async firstJson<T>() {
      for (;;) {
        const [first] = parsed();
        if (first) return first as T;
        if (child.exitCode !== null) throw new Error(`${entry.join(' ')} exited with ${child.exitCode}`);
        await Promise.race([new Promise<void>((resolve) => waiters.push(resolve)), exited]);
      }
    },
    async result<T>() {
      const code = await exited;
      const last = parsed().at(-1);
      if (code !== 0 || !last)
        throw new Error(`${entry.join(' ')} ${args.join(' ').slice(0, 80)} exited with ${code}`);
      return last as T;
    },
    async stop() {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/**
 * How `npm run serve` starts the compiled gateway in production: its leading `NAME=value`
 * environment and its node flags, read from the script itself so the benchmark measures the same.
 */
export function serveCommand(): { env: Record<string, string>; nodeOptions: string[] } {
  const manifest = JSON.parse(readFileSync(join(SERVER_DIR, 'package.json'), 'utf8')) as {
    scripts: Record<string, string>;
  };
  const words = (manifest.scripts.serve ?? '').split(/\s+/).filter(Boolean);
  const node = words.indexOf('node');
  if (node < 0 || words.at(-1) !== 'dist/main.js')
    throw new Error(
      `the serve script is not "[NAME=value ...] node [flags] dist/main.js": ${manifest.scripts.serve}`,
    );
  const assignments = words.slice(0, node).map((word) => word.split('=') as [string, string]);
  return { env: Object.fromEntries(assignments), nodeOptions: words.slice(node + 1, -1) };
}

/** A port nothing listens on right now. */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, 'close');
  return port;
}

/** Polls `url` until it answers 200 (or gives up after `timeoutMs`). */
export async function waitUntilUp(url: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${url} did not come up within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Resident set size of a process, from /proc (Linux), in bytes. */
export async function residentBytes(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kib = /^VmRSS:\s+(\d+)\s+kB/m.exec(status)?.[1];
  if (!kib) throw new Error(`no VmRSS for process ${pid}`);
  return Number(kib) * 1024;
}

/** CPU time (user + system) a process has used so far, in milliseconds, from /proc (Linux). */
export async function cpuMilliseconds(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces) start after its closing parenthesis.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  return (ticks * 1000) / CLOCK_TICKS_PER_SECOND;
}

// sysconf(_SC_CLK_TCK) is 100 on Linux.
const CLOCK_TICKS_PER_SECOND = 100;
