import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { startAnthropicSimulator } from '../../devkit/simulators/index.js';
import type { LocalStackFacts } from '../../devkit/stack/facts.js';
import { repoRoot } from '../../devkit/stack/paths.js';
import { runProcess } from '../support/run-process.js';
import { alive } from './processes.js';

const dirs: string[] = [];
const groups: ChildProcess[] = [];
afterAll(() => {
  for (const child of groups)
    if (child.exitCode === null && child.signalCode === null) process.kill(-(child.pid as number), 'SIGKILL');
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** `npm start` from the repository root, in its own process group (as a terminal runs it), with `env` added. */
function npmStart(env: Record<string, string> = {}) {
  const dataDir = mkdtempSync(join(tmpdir(), 'paygate-npm-start-'));
  dirs.push(dataDir);
  const child = spawn('npm', ['start'], {
    cwd: repoRoot,
    detached: true,
    env: { ...process.env, PORT: '0', RPC_PORT: '0', DATA_DIR: dataDir, SKIP_DASHBOARD_BUILD: '1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  groups.push(child);
  let stdout = '';
  let stderr = '';
  child.stderr?.on('data', (chunk) => {
    stderr += chunk;
  });
  const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  const banner = new Promise<string>((resolve, reject) => {
    child.stdout?.on('data', (chunk) => {
      stdout += chunk;
      if (stdout.includes('console.log(reply')) resolve(stdout);
    });
    void exited.then(([code]) =>
      reject(new Error(`npm start exited (${code}) before it was up:\n${stderr}`)),
    );
  });
  const facts = async () =>
    JSON.parse(await readFile(join(dataDir, 'local-stack.json'), 'utf8')) as LocalStackFacts;
  return { child, banner, exited, facts, stderr: () => stderr };
}

describe('npm start', () => {
  test('prints the URLs, the treasury, the funded owners and an example, and exits 0 on SIGINT with anvil gone', async () => {
    const started = npmStart();
    const banner = await started.banner;
    const facts = await started.facts();

    expect(banner).toContain(`Gateway      ${facts.gatewayUrl}`);
    expect(banner).toContain(`GraphQL      ${facts.gatewayUrl}/graphql`);
    expect(banner).toContain(`Chain RPC    ${facts.rpcUrl} (chain id 31337)`);
    expect(banner).toContain(`Faucet       ${facts.faucetUrl}`);
    expect(banner).toContain('Dashboard');
    expect(banner).toContain(`Treasury     ${facts.treasury}`);
    for (const owner of facts.testOwners) {
      expect(banner).toContain(owner.privateKey);
      expect(banner).toContain(owner.smartAccount);
    }
    expect(banner).toContain(`new OpenAI({ baseURL: '${facts.gatewayUrl}/v1'`);
    // The example works as pasted into another shell, one that does not know the stack's DATA_DIR.
    const answer = JSON.parse(await runShell(exampleCommands(banner)));
    expect(answer.choices[0].message.content).toBe('echo: Hello there');

    const health = await fetch(`${facts.gatewayUrl}/health`);
    expect(health.status).toBe(200);
    expect(alive(facts.anvilPid)).toBe(true);

    process.kill(facts.pid, 'SIGINT');
    const [code] = await started.exited;
    expect(code).toBe(0);
    expect(alive(facts.pid)).toBe(false);
    expect(alive(facts.anvilPid)).toBe(false);
    expect(started.stderr()).toContain('stopped');
    await expect(fetch(`${facts.gatewayUrl}/health`)).rejects.toThrow();
  });

  test("with a provider's base URL and key set, sends that family there with that key and the other to its simulator, and says so", async () => {
    const standIn = await startAnthropicSimulator();
    standIn.script({ text: 'from the stand-in' });
    try {
      const started = npmStart({ ANTHROPIC_BASE_URL: standIn.url, ANTHROPIC_API_KEY: 'sk-ant-developer' });
      const banner = await started.banner;
      const facts = await started.facts();

      expect(facts.providers).toEqual({
        anthropic: { baseUrl: standIn.url, simulated: false },
        gemini: { baseUrl: facts.simulators.gemini, simulated: true },
      });
      expect(banner).toContain(`Anthropic    ${standIn.url} (from ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL)`);
      expect(banner).toContain(
        `Gemini       ${facts.simulators.gemini} (simulator; set GEMINI_API_KEY for the real API)`,
      );
      // The banner's example asks an Anthropic model: the stand-in answers, given the developer's key.
      const example = exampleCommands(banner);
      const answer = JSON.parse(await runShell(example));
      expect(answer.choices[0].message.content).toBe('from the stand-in');
      expect(standIn.log).toHaveLength(1);
      expect(standIn.log[0]?.headers['x-api-key']).toBe('sk-ant-developer');
      // A Gemini model still goes to the stack's simulator.
      const gemini = JSON.parse(
        await runShell(example.replace('anthropic/claude-sonnet-5.5', 'google/gemini-3.8-flash')),
      );
      expect(gemini.choices[0].message.content).toBe('echo: Hello there');
      expect(standIn.log).toHaveLength(1);

      process.kill(facts.pid, 'SIGINT');
      expect((await started.exited)[0]).toBe(0);
    } finally {
      await standIn.close();
    }
  });

  test('Ctrl-C (SIGINT to the whole process group) stops the stack and its anvil', async () => {
    const started = npmStart();
    await started.banner;
    const facts = await started.facts();

    process.kill(-(started.child.pid as number), 'SIGINT');
    await started.exited;
    // npm itself dies of the signal like any Ctrl-C'd npm script; the stack must have stopped cleanly under it.
    // anvil got the SIGINT too and shuts down on its own time: wait for it (the test's timeout bounds the wait).
    await waitUntil(() => !alive(facts.pid) && !alive(facts.anvilPid));
    expect(started.stderr()).toContain('stopped');
  });
});

/** The banner's shell example: from its first step to the openai client's, which is not shell. */
function exampleCommands(banner: string): string {
  const start = banner.indexOf('# 1.');
  const end = banner.indexOf('# or with the openai client');
  expect(start).toBeGreaterThan(-1);
  expect(end).toBeGreaterThan(start);
  return banner.slice(start, end);
}

/** Runs `script` with bash from the repository root, without DATA_DIR; resolves with its stdout. */
async function runShell(script: string): Promise<string> {
  const { DATA_DIR: _dataDir, ...env } = process.env;
  const { code, stdout, stderr } = await runProcess('bash', ['-euo', 'pipefail', '-c', script], {
    cwd: repoRoot,
    env,
    timeoutMs: 30_000,
  });
  if (code !== 0) throw new Error(`the banner's example exited ${code}:\n${stderr}`);
  return stdout;
}

async function waitUntil(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 50));
}
