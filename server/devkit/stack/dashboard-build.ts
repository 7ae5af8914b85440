import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from './paths.js';

const webDir = join(repoRoot, 'web');

/**
 * Builds the dashboard (`npm run build -w web`) when web/dist is missing, so a fresh clone serves it. A missing or
 * failing web app is reported through `warn` and the stack runs without a dashboard.
 */
export async function ensureDashboardBuilt(warn: (message: string) => void): Promise<void> {
  if (existsSync(join(webDir, 'dist', 'index.html'))) return;
  if (!hasWebApp()) {
    warn('dashboard: the web app does not exist yet; the stack runs without it');
    return;
  }
  warn('dashboard: web/dist is missing, building it (npm run build -w web)...');
  // its output goes to stderr: stdout is the stack's own summary
  const build = spawn('npm', ['run', 'build', '-w', 'web'], { cwd: repoRoot, stdio: ['ignore', 2, 2] });
  const [code] = (await once(build, 'exit')) as [number | null];
  if (code !== 0 || !existsSync(join(webDir, 'dist', 'index.html')))
    warn(`dashboard: the build failed (exit ${code}); the stack runs without it`);
}

function hasWebApp(): boolean {
  try {
    const manifest = JSON.parse(readFileSync(join(webDir, 'package.json'), 'utf8')) as {
      scripts?: { build?: string };
    };
    return Boolean(manifest.scripts?.build) && existsSync(join(webDir, 'index.html'));
  } catch {
    return false;
  }
}
