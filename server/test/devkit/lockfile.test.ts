import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { repoRoot } from '../../devkit/stack/paths.js';

interface LockedPackage {
  optionalDependencies?: Record<string, string>;
}

/**
 * The optional dependencies (each platform's binary of a package) that the lockfile names but does
 * not lock: `npm ci` refuses such a lockfile on a platform whose binary is missing from it.
 */
function unlockedOptionalDependencies(packages: Record<string, LockedPackage>): string[] {
  return Object.entries(packages).flatMap(([path, locked]) =>
    Object.keys(locked.optionalDependencies ?? {})
      .filter((name) => !resolvable(packages, path, name))
      .map((name) => `${path || '(root)'} -> ${name}`),
  );
}

/** Whether Node would find `name` from the package at `path`: in its own node_modules or an enclosing one. */
function resolvable(packages: Record<string, LockedPackage>, path: string, name: string): boolean {
  for (let dir = path; ; dir = dir.slice(0, Math.max(dir.lastIndexOf('/node_modules/'), 0))) {
    if (`${dir ? `${dir}/` : ''}node_modules/${name}` in packages) return true;
    if (dir === '') return false;
  }
}

describe('package-lock.json', () => {
  const lock = JSON.parse(readFileSync(join(repoRoot, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, LockedPackage>;
  };

  test("locks every platform's optional package, so npm ci accepts it on any platform", () => {
    expect(unlockedOptionalDependencies(lock.packages)).toEqual([]);
    // Biome's binaries are such packages: the check sees them.
    expect(Object.keys(lock.packages['node_modules/@biomejs/biome']?.optionalDependencies ?? {})).toContain(
      '@biomejs/cli-darwin-arm64',
    );
  });

  test('a lockfile pruned to one platform is caught', () => {
    const { 'node_modules/@biomejs/cli-darwin-arm64': _pruned, ...pruned } = lock.packages;
    expect(unlockedOptionalDependencies(pruned)).toEqual([
      'node_modules/@biomejs/biome -> @biomejs/cli-darwin-arm64',
    ]);
  });
});
