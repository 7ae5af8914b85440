import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { CHROMIUM } from './support/chromium.js';
import { STACK_ENV, type StackFacts } from './support/stack.js';

const e2eDir = fileURLToPath(new URL('.', import.meta.url));
const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const STACK_START_TIMEOUT_MS = 120_000;

/**
 * Makes sure Debian's chromium is there, builds the dashboard, and starts the local stack (anvil with the
 * contracts, provider simulators, faucet, gateway serving web/dist) in a child process. Returns the teardown,
 * which stops that process and everything it started.
 */
export default async function globalSetup(): Promise<() => Promise<void>> {
  ensureChromium();
  run('npm', ['run', 'build', '-w', 'web'], 'building the dashboard');
  const { child, facts } = await startStack();
  process.env[STACK_ENV] = JSON.stringify(facts);
  return () => stopStack(child);
}

function ensureChromium(): void {
  if (existsSync(CHROMIUM)) return;
  run('sh', [`${e2eDir}scripts/install-chromium.sh`], 'installing chromium from Debian');
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is still missing after installing chromium`);
}

function run(command: string, args: string[], what: string): void {
  const result = spawnSync(command, args, { cwd: repoRoot, stdio: ['ignore', 'inherit', 'inherit'] });
  if (result.status !== 0)
    throw new Error(`${what} failed (${command} ${args.join(' ')}: exit ${result.status})`);
}

async function startStack(): Promise<{ child: ChildProcess; facts: StackFacts }> {
  const tsx = createRequire(import.meta.url).resolve('tsx');
  const child = spawn(process.execPath, ['--import', tsx, `${e2eDir}support/stack-process.ts`], {
    cwd: repoRoot,
    // stdin stays open: the stack stops itself when this process goes away and closes it
    stdio: ['pipe', 'pipe', 'inherit'],
    env: { ...process.env, DO_NOT_TRACK: '1' },
  });
  const lines = createInterface({ input: child.stdout! });
  try {
    const facts = await new Promise<StackFacts>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error('the local stack did not start in time')),
        STACK_START_TIMEOUT_MS,
      );
      child.once('exit', (code) =>
        reject(new Error(`the local stack exited during start-up (exit ${code})`)),
      );
      lines.on('line', (line) => {
        if (!line.startsWith('PAYGATE_STACK ')) return void process.stdout.write(`[stack] ${line}\n`);
        clearTimeout(timer);
        resolve(JSON.parse(line.slice('PAYGATE_STACK '.length)) as StackFacts);
      });
    });
    return { child, facts };
  } catch (error) {
    await stopStack(child);
    throw error;
  }
}

async function stopStack(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(timer);
}
