import type { Address } from 'viem';

/** What the tests need of the running local stack (passed from global setup through the environment). */
export interface StackFacts {
  gatewayUrl: string;
  dashboardUrl: string | null;
  rpcUrl: string;
  chainId: number;
  usdc: Address;
  treasury: Address;
  faucetUrl: string;
  commissionBps: number;
  /** The gateway's ADMIN_TOKEN: the operator view's bearer. */
  adminToken: string;
  pid: number;
  anvilPid: number;
}

export const STACK_ENV = 'PAYGATE_E2E_STACK';

export function stackFacts(): StackFacts {
  const raw = process.env[STACK_ENV];
  if (!raw)
    throw new Error(
      `${STACK_ENV} is not set: run the suite with "npm test -w e2e" (global setup starts the stack)`,
    );
  return JSON.parse(raw) as StackFacts;
}
