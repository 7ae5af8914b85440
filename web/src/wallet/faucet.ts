import type { Address } from 'viem';
import { callGateway } from '../gateway/api';

/** The local stack's faucet (server/devkit/faucet.ts): mints test USDC and adds ETH on the local chain. */
export function requestTestMoney(
  faucetUrl: string,
  grant: { address: Address; usdc: string; eth: string },
): Promise<{ usdcBalance: string; ethBalance: string }> {
  return callGateway(`${faucetUrl}/fund`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(grant),
  });
}
