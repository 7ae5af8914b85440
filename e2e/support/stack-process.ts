/**
 * Runs a local stack for the end-to-end suite in its own process (started by global-setup.ts with tsx): prints
 * one `PAYGATE_STACK <json>` line once everything listens, and stops everything when told (SIGTERM/SIGINT) or
 * when its parent goes away (stdin closes).
 */
import { startLocalStack } from '../../server/devkit/stack/local-stack.js';
import type { StackFacts } from './stack.js';

const ADMIN_TOKEN = 'e2e-operator-token-0123456789';
const stack = await startLocalStack({
  port: 0,
  tempDataDir: true,
  testOwners: 0,
  logLevel: 'warn',
  gateway: { adminToken: ADMIN_TOKEN },
});
const facts: StackFacts = {
  gatewayUrl: stack.gatewayUrl,
  dashboardUrl: stack.dashboardUrl,
  rpcUrl: stack.rpcUrl,
  chainId: stack.chainId,
  usdc: stack.usdc,
  treasury: stack.treasury,
  faucetUrl: stack.faucetUrl,
  commissionBps: stack.config.commissionBps,
  adminToken: ADMIN_TOKEN,
  pid: process.pid,
  anvilPid: stack.anvilPid,
};
process.stdout.write(`PAYGATE_STACK ${JSON.stringify(facts)}\n`);

let stopping = false;
async function stop(): Promise<void> {
  if (stopping) return;
  stopping = true;
  try {
    await stack.stop();
    process.exit(0);
  } catch (error) {
    console.error(error);
    process.exit(1);
  }
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
process.stdin.on('close', stop);
process.stdin.resume();
