import { type ChildProcessByStdio, spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import type { Readable, Writable } from 'node:stream';

export interface AnvilOptions {
  /** Seconds between blocks; 0 mines one block per transaction. Default 0.2 (like an L2). */
  blockTime?: number;
  /** Default: a free port picked by anvil itself (no race between choosing and binding). */
  port?: number;
  /** A state file written by `anvil_dumpState`, loaded before the first block. */
  loadState?: string;
}

export interface AnvilProcess {
  rpcUrl: string;
  port: number;
  /** The anvil process itself (not its watchdog shell). */
  pid: number;
  /** Kills anvil and resolves once the process is gone. Safe to call twice. */
  stop(): Promise<void>;
}

const require = createRequire(import.meta.url);
const startTimeoutMs = 20_000;
const stopTimeoutMs = 5_000;

// The binary ships in a per-platform package, an optional dependency of `@foundry-rs/anvil`.
const platformPackage = `@foundry-rs/anvil-${process.platform}-${{ x64: 'amd64', arm64: 'arm64' }[process.arch as string]}`;

/** The anvil binary shipped by the `@foundry-rs/anvil` npm package for this platform. */
export function anvilBinaryPath(): string {
  const binary = process.platform === 'win32' ? 'anvil.exe' : 'anvil';
  try {
    return require.resolve(`${platformPackage}/bin/${binary}`);
  } catch {
    throw new Error(`anvil binary not found: install @foundry-rs/anvil (expected ${platformPackage})`);
  }
}

export function anvilVersion(): string {
  return (require(`${platformPackage}/package.json`) as { version: string }).version;
}

// A shell between us and anvil holds the read end of our stdin pipe. However this process ends (stop(),
// normal exit, a crash, SIGKILL of a vitest worker), the pipe closes, `read` returns and the shell kills
// anvil: no orphaned chains. The shell waits for anvil and exits with its status.
const watchdogScript = [
  'exec 3<&0',
  '"$@" </dev/null 3<&- & child=$!',
  'echo "anvil-pid $child"',
  '(read -r _ <&3; kill "$child" 2>/dev/null) >/dev/null 2>&1 &',
  'wait "$child"',
].join('\n');

/** Starts anvil on 127.0.0.1 and resolves once it answers JSON-RPC. */
export async function startAnvil(options: AnvilOptions = {}): Promise<AnvilProcess> {
  const { blockTime = 0.2, port = 0, loadState } = options;
  const args = ['--host', '127.0.0.1', '--port', String(port)];
  if (blockTime > 0) args.push('--block-time', String(blockTime));
  if (loadState) args.push('--load-state', loadState);

  const child = spawn('/bin/sh', ['-c', watchdogScript, 'anvil-watchdog', anvilBinaryPath(), ...args], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let output = '';
  const keepTail = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-8_000);
  };
  child.stdout.on('data', keepTail);
  child.stderr.on('data', keepTail);

  let started: { pid: number; port: number };
  try {
    started = await waitForListening(child, () => output);
  } catch (err) {
    await kill(child, exited, undefined);
    throw err;
  }
  const rpcUrl = `http://127.0.0.1:${started.port}`;
  try {
    await rpc(rpcUrl, 'eth_chainId');
  } catch (err) {
    await kill(child, exited, started.pid);
    throw new Error(`anvil on ${rpcUrl} does not answer JSON-RPC: ${(err as Error).message}`);
  }
  // Nobody reads the block log; dropping the listener would let the pipe fill and stall anvil.
  child.stdout.off('data', keepTail).resume();
  child.stderr.off('data', keepTail).resume();
  unref(child);

  return {
    rpcUrl,
    port: started.port,
    pid: started.pid,
    stop: () => kill(child, exited, started.pid),
  };
}

type AnvilChild = ChildProcessByStdio<Writable, Readable, Readable>;

function waitForListening(child: AnvilChild, output: () => string): Promise<{ pid: number; port: number }> {
  return new Promise((resolve, reject) => {
    let pid: number | undefined;
    const timer = setTimeout(
      () => fail(new Error(`anvil did not start within ${startTimeoutMs} ms:\n${output()}`)),
      startTimeoutMs,
    );
    const onData = () => {
      const text = output();
      pid ??= Number(/anvil-pid (\d+)/.exec(text)?.[1]) || undefined;
      const port = Number(/Listening on 127\.0\.0\.1:(\d+)/.exec(text)?.[1]);
      if (pid && port) done(() => resolve({ pid: pid as number, port }));
    };
    const onExit = (code: number | null) =>
      fail(new Error(`anvil exited (code ${code}) before listening:\n${output()}`));
    const fail = (err: Error) => done(() => reject(err));
    const done = (settle: () => void) => {
      clearTimeout(timer);
      child.stdout.off('data', onData);
      child.off('exit', onExit);
      settle();
    };
    child.stdout.on('data', onData);
    child.once('exit', onExit);
  });
}

async function kill(child: AnvilChild, exited: Promise<void>, anvilPid: number | undefined): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.ref(); // keep the event loop alive until the exit is observed
  child.stdin.end();
  signal(anvilPid ?? child.pid, 'SIGTERM');
  const timedOut = await Promise.race([
    exited.then(() => false),
    new Promise<boolean>((resolve) => setTimeout(resolve, stopTimeoutMs, true).unref()),
  ]);
  if (timedOut) {
    signal(anvilPid, 'SIGKILL');
    signal(child.pid, 'SIGKILL');
    await exited;
  }
}

function signal(pid: number | undefined, name: NodeJS.Signals): void {
  if (pid === undefined) return;
  try {
    process.kill(pid, name);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}

/** A forgotten anvil must not keep a script alive; the watchdog still kills it when this process ends. */
function unref(child: AnvilChild): void {
  child.unref();
  for (const stream of [child.stdin, child.stdout, child.stderr]) {
    (stream as unknown as { unref?: () => void }).unref?.();
  }
}

/** A bare JSON-RPC call, for the moments before viem clients exist (readiness, state dumps). */
export async function rpc<T = unknown>(rpcUrl: string, method: string, params: unknown[] = []): Promise<T> {
  const res = await fetch(rpcUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  const body = (await res.json()) as { result?: T; error?: { message: string } };
  if (body.error) throw new Error(`${method}: ${body.error.message}`);
  return body.result as T;
}
