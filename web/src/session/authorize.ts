import {
  type AuthorizedSession,
  authorizeWithSmartAccount,
  revokeSession as revoke,
} from '@paygate/server/client';
import type { SmartAccount } from '../wallet/smart-account';

/** What the payer grants: a USDC cap, over the whole session or per period, and a lifetime. */
export interface SessionGrant {
  capAtomic: bigint;
  /** Seconds per period; absent: the cap holds for the whole session. */
  periodSeconds?: number;
  lifetimeSeconds: number;
}

/** The dashboard is served by the gateway (or proxied to it in development): same origin. */
const gatewayUrl = () => window.location.origin;

/**
 * Builds the delegation the gateway's policy accepts (USDC only, to the treasury only, redeemed by
 * the session key only, capped, expiring), has the smart account sign it (the wallet shows the typed
 * data), and trades it for an access token.
 */
export function authorizeSession(account: SmartAccount, grant: SessionGrant): Promise<AuthorizedSession> {
  return authorizeWithSmartAccount({
    gatewayUrl: gatewayUrl(),
    smartAccount: account,
    cap: grant.capAtomic,
    period: grant.periodSeconds === undefined ? undefined : { seconds: grant.periodSeconds },
    expiresAt: new Date(Date.now() + grant.lifetimeSeconds * 1000),
  });
}

/** Ends the session at the gateway: its token is refused from now on. */
export async function revokeSession(token: string): Promise<void> {
  await revoke({ gatewayUrl: gatewayUrl(), token });
}
