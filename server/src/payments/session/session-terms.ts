import { pad } from 'viem';
import type { SessionTerms } from '../../client/types.js';
import { type ChainClient, delegationDomain, ROOT_AUTHORITY } from '../chain/index.js';
import {
  acceptedEnforcers,
  MIN_PERIOD_SECONDS,
  MIN_SESSION_SECONDS,
  type SessionPolicy,
} from './delegation-policy.js';

/** `GET /v1/authorize`: what a client needs to build and sign a session delegation. */
export async function sessionTerms(chain: ChainClient, policy: SessionPolicy): Promise<SessionTerms> {
  return {
    chainId: chain.chainId,
    network: chain.network,
    sessionKey: policy.sessionKey,
    treasury: policy.treasury,
    usdc: await chain.token(),
    delegationManager: chain.environment.DelegationManager,
    domain: delegationDomain(chain.chainId, chain.environment.DelegationManager),
    enforcers: acceptedEnforcers(chain.environment),
    environment: chain.environment,
    policy: {
      authority: ROOT_AUTHORITY,
      amountCaps: ['ERC20TransferAmountEnforcer', 'ERC20PeriodTransferEnforcer'],
      minCapAtomic: policy.minCapAtomic.toString(),
      minPeriodSeconds: MIN_PERIOD_SECONDS,
      recipient: {
        enforcer: 'AllowedCalldataEnforcer',
        startIndex: 4,
        value: pad(policy.treasury, { size: 32 }),
      },
      expiry: {
        enforcer: 'TimestampEnforcer',
        minSeconds: MIN_SESSION_SECONDS,
        maxSeconds: policy.maxLifetimeSeconds,
      },
      optional: ['RedeemerEnforcer', 'ValueLteEnforcer', 'NonceEnforcer'],
    },
  };
}
