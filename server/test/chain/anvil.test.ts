import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { createPublicClient, http } from 'viem';
import { expect, test, vi } from 'vitest';
import { startAnvil } from '../../devkit/chain/index.js';

const isRunning = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

test('anvil answers JSON-RPC on 127.0.0.1 as chain 31337 and mines on its own', async () => {
  const anvil = await startAnvil({ blockTime: 0.2 });
  try {
    expect(anvil.rpcUrl).toBe(`http://127.0.0.1:${anvil.port}`);
    const client = createPublicClient({ transport: http(anvil.rpcUrl) });
    expect(await client.getChainId()).toBe(31337);
    const first = await client.getBlockNumber({ cacheTime: 0 });
    await vi.waitFor(
      async () => expect(await client.getBlockNumber({ cacheTime: 0 })).toBeGreaterThan(first),
      {
        timeout: 5_000,
        interval: 50,
      },
    );
  } finally {
    await anvil.stop();
  }
});

test('stop() kills anvil: its pid is gone and stopping again is harmless', async () => {
  const anvil = await startAnvil();
  expect(isRunning(anvil.pid)).toBe(true);
  await anvil.stop();
  expect(isRunning(anvil.pid)).toBe(false);
  await anvil.stop();
});

test('a busy port is reported with anvil’s own message', async () => {
  const anvil = await startAnvil();
  try {
    await expect(startAnvil({ port: anvil.port })).rejects.toThrow(/anvil exited.*before listening/s);
  } finally {
    await anvil.stop();
  }
});

test('an anvil whose owning process is killed (no stop, no exit handlers) dies with it', async () => {
  const fixture = fileURLToPath(new URL('fixtures/abandoned-anvil.ts', import.meta.url));
  const owner = spawn(process.execPath, ['--import', 'tsx', fixture], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [line] = (await once(owner.stdout, 'data')) as [Buffer];
  const { pid } = JSON.parse(line.toString()) as { pid: number };
  expect(isRunning(pid)).toBe(true);

  owner.kill('SIGKILL');

  await vi.waitFor(() => expect(isRunning(pid)).toBe(false), { timeout: 5_000, interval: 20 });
});
