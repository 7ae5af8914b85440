import type { SessionTerms } from '@paygate/server/client';
import { useQuery } from '@tanstack/react-query';
import { callGateway } from './api';

/**
 * What the gateway asks of a session delegation (`GET /v1/authorize`), and on a local chain where
 * the browser reaches that chain and its test-money faucet.
 */
export type Terms = SessionTerms & {
  /** A local chain's JSON-RPC endpoint (never published for public chains). */
  rpcUrl?: string;
  /** A local chain's test-money faucet. */
  devFaucetUrl?: string;
};

export const LOCAL_CHAIN_ID = 31337;

export function useTerms() {
  return useQuery({
    queryKey: ['terms'],
    queryFn: () => callGateway<Terms>('/v1/authorize'),
    staleTime: Number.POSITIVE_INFINITY,
    retry: false,
  });
}
