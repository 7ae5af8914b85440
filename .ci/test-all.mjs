// Runs every test suite of the repository (vitest in server/, Playwright in e2e/ once it has a
// config) and ends the output with one plain line, `N passed, N failed, N skipped`, summed over
// all runners. Exits non-zero when anything failed, including a runner that crashed.
// Arguments are passed to vitest (`npm test -- test/http` runs only those server suites).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const reports = mkdtempSync(join(tmpdir(), 'paygate-test-reports-'));

const runners = [
  {
    name: 'server (vitest)',
    cwd: join(root, 'server'),
    enabled: true,
    command: (report) => [
      'npx',
      [
        '--no',
        'vitest',
        'run',
        '--reporter=default',
        '--reporter=json',
        `--outputFile.json=${report}`,
        ...process.argv.slice(2),
      ],
    ],
    env: () => ({}),
    count: (json) => ({
      passed: json.numPassedTests,
      failed: json.numFailedTests,
      skipped: json.numPendingTests + json.numTodoTests,
      // A file that cannot even load fails its suite without failing a test.
      suiteFailures: json.numFailedTestSuites,
    }),
  },
  {
    name: 'e2e (playwright)',
    cwd: join(root, 'e2e'),
    enabled: process.argv.length <= 2 && existsSync(join(root, 'e2e', 'playwright.config.ts')),
    command: () => ['npx', ['--no', 'playwright', 'test', '--reporter=list,json']],
    env: (report) => ({ PLAYWRIGHT_JSON_OUTPUT_FILE: report }),
    count: (json) => ({
      passed: json.stats.expected + json.stats.flaky,
      failed: json.stats.unexpected,
      skipped: json.stats.skipped,
      suiteFailures: json.errors?.length ?? 0,
    }),
  },
];

const total = { passed: 0, failed: 0, skipped: 0 };
const lines = [];
try {
  for (const runner of runners.filter((r) => r.enabled)) {
    const report = join(reports, `${runner.name.split(' ')[0]}.json`);
    const [command, args] = runner.command(report);
    const result = spawnSync(command, args, {
      cwd: runner.cwd,
      stdio: 'inherit',
      env: { ...process.env, ...runner.env(report) },
    });
    const counts = readCounts(runner, report);
    // A runner that exits non-zero failed, even when its report shows no failing test.
    if (result.status !== 0 && counts.failed === 0) counts.failed = Math.max(counts.suiteFailures, 1);
    total.passed += counts.passed;
    total.failed += counts.failed;
    total.skipped += counts.skipped;
    lines.push(
      `${runner.name}: ${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped` +
        (result.status === 0 ? '' : ` (exit ${result.status ?? result.signal})`),
    );
  }
} finally {
  rmSync(reports, { recursive: true, force: true });
}

console.log('');
for (const line of lines) console.log(line);
console.log(`${total.passed} passed, ${total.failed} failed, ${total.skipped} skipped`);
process.exitCode = total.failed > 0 ? 1 : 0;

function readCounts(runner, report) {
  try {
    return runner.count(JSON.parse(readFileSync(report, 'utf8')));
  } catch (error) {
    console.error(`${runner.name}: no usable report (${error.message})`);
    return { passed: 0, failed: 1, skipped: 0, suiteFailures: 1 };
  }
}
