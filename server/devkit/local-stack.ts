/**
 * `npm start`: the whole local stack (anvil with the contracts, provider simulators, dev faucet, gateway on SQLite,
 * dashboard) with no keys and no internet. Ctrl-C stops everything it started.
 *
 * Environment: PORT (gateway, default 8080), RPC_PORT (anvil, default 8545; 0 for a free port), DATA_DIR (default
 * <repo>/data), LOG_LEVEL (gateway, default warn), SKIP_DASHBOARD_BUILD=1 (do not build a missing web/dist), and
 * any gateway variable the stack does not set itself: ANTHROPIC_API_KEY or ANTHROPIC_BASE_URL (GEMINI_* alike) sends
 * that family to the real provider (or that URL) instead of its simulator.
 */

import { stackBanner } from './stack/banner.js';
import { ensureDashboardBuilt } from './stack/dashboard-build.js';
import { startLocalStack } from './stack/local-stack.js';

const TEST_OWNER_USDC = 1_000_000_000n;

async function main(): Promise<void> {
  const warn = (message: string) => console.error(message);
  if (process.env.SKIP_DASHBOARD_BUILD !== '1') await ensureDashboardBuilt(warn);
  const stack = await startLocalStack({
    port: portFromEnv('PORT', 8080),
    rpcPort: portFromEnv('RPC_PORT', 8545),
    dataDir: process.env.DATA_DIR || undefined,
    logLevel: process.env.LOG_LEVEL || 'warn',
    testOwnerUsdc: TEST_OWNER_USDC,
    env: process.env,
  });
  process.stdout.write(stackBanner(stack, stack.factsPath, TEST_OWNER_USDC));

  let stopping = false;
  const shutdown = async (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    console.error(`${signal}: stopping the local stack...`);
    try {
      await stack.stop();
      console.error('stopped');
      process.exit(0);
    } catch (error) {
      console.error(error);
      process.exit(1);
    }
  };
  process.on('SIGINT', shutdown);
  process.on('SIGTERM', shutdown);
}

function portFromEnv(name: string, fallback: number): number {
  const raw = process.env[name]?.trim();
  if (!raw) return fallback;
  const port = Number(raw);
  if (!/^\d+$/.test(raw) || port > 65535)
    throw new Error(`${name} must be a port number (0-65535), got "${raw}"`);
  return port;
}

main().catch((error: unknown) => {
  const message = error instanceof Error ? error.message : String(error);
  console.error(`the local stack could not start: ${message}`);
  if (/address already in use|EADDRINUSE/i.test(message))
    console.error('a port is taken: set PORT and/or RPC_PORT (0 picks a free port)');
  process.exit(1);
});
