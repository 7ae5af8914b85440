import { randomUUID } from 'node:crypto';
import type { Delegation } from '@metamask/smart-accounts-kit';
import type { Address, Hex } from 'viem';
import type { SessionLimits } from '../../client/types.js';
import { GatewayError, validationError } from '../../errors.js';
import type { Store } from '../../store/database.js';
import { insertSession } from '../../store/sessions.js';
import {
  type ChainClient,
  chainErrorReason,
  currentDelegatorNonce,
  delegationDomain,
  delegatorCode,
  deploysDeleGator,
  GAS_CAPS,
  hashDelegation,
  isDelegationDisabled,
  isTransportFailure,
  type PendingDeployment,
  type RedeemableSignature,
  redeemableSignature,
  verifyDelegationSignature,
} from '../chain/index.js';
import { checkDelegation, type SessionPolicy } from './delegation-policy.js';
import { findSessionByDelegationHash } from './session-records.js';

export interface SessionRequest {
  chainId: number;
  delegation: Omit<Delegation, 'signature'>;
  /** The delegation's EIP-712 signature by the delegator (raw, or ERC-6492-wrapped). */
  signature: Hex;
}

export interface AuthorizedSession {
  sessionId: string;
  wallet: Address;
  expiresAt: Date;
  limits: SessionLimits;
}

export interface SessionAuthorizer {
  readonly policy: SessionPolicy;
  /** Verifies and stores a session; GatewayError 400 (policy, replay), 401 (signature) or 503 (chain). */
  authorize(request: SessionRequest, now?: Date): Promise<AuthorizedSession>;
}

const REPLAYED = 'was already used to authorize a session; sign a new delegation with a fresh salt';

export function createSessionAuthorizer(
  store: Store,
  chain: ChainClient,
  policy: SessionPolicy,
): SessionAuthorizer {
  const domain = delegationDomain(chain.chainId, chain.environment.DelegationManager);
  const client = chain.publicClient;

  return {
    policy,
    async authorize({ chainId, delegation, signature }, now = new Date()) {
      if (chainId !== policy.chainId)
        throw validationError(
          'chainId',
          `must be ${policy.chainId}: this gateway settles on eip155:${policy.chainId}`,
        );
      const accepted = checkDelegation(policy, delegation, now);
      const delegator = accepted.delegation.delegator;
      const { deployment } = redeemableOrRefused(signature);
      if (deployment && !(await deploysDeleGator(deployment, chain.environment)))
        throw validationError(
          'x-authorization-signature',
          `must deploy a MetaMask smart account (a DeleGator proxy) through the Delegation Framework's SimpleFactory ${chain.environment.SimpleFactory}`,
        );
      const delegationHash = hashDelegation({ ...accepted.delegation, signature: '0x' });

      const [code, valid, disabled, nonce] = await onChain(() =>
        Promise.all([
          delegatorCode(client, delegator, chain.environment),
          // A signature viem cannot decode (an ERC-6492 or ERC-8010 suffix wrapping nothing) is not valid.
          verifyDelegationSignature(client, domain, accepted.delegation, signature).catch(
            (error: unknown) => {
              if (isTransportFailure(error)) throw error;
              return false;
            },
          ),
          isDelegationDisabled(client, chain.environment.DelegationManager, delegationHash),
          accepted.nonce === undefined
            ? undefined
            : currentDelegatorNonce(
                client,
                chain.environment.caveatEnforcers.NonceEnforcer as Address,
                chain.environment.DelegationManager,
                delegator,
              ),
        ]),
      );
      if (code === 'none' && !deployment)
        throw validationError(
          'delegation.delegator',
          'is not a deployed smart account: deploy it, or sign with ERC-6492 (as an undeployed MetaMask smart account does) so the gateway deploys it before the first settlement',
        );
      if (code === 'other')
        throw validationError(
          'delegation.delegator',
          "must be a MetaMask smart account: the Delegation Framework's DeleGator proxy over one of its implementations, or an EOA delegating to its EIP-7702 DeleGator",
        );
      if (!valid) throw notTheSignature();
      if (deployment && code === 'none') await checkDeploymentGas(chain, deployment);
      if (disabled) throw validationError('delegation', 'is disabled in the DelegationManager');
      if (nonce !== undefined && nonce !== accepted.nonce)
        throw validationError(
          'delegation.caveats',
          `names NonceEnforcer nonce ${accepted.nonce} but the delegator's is ${nonce}: the delegator revoked it`,
        );
      if (await findSessionByDelegationHash(store, delegationHash))
        throw validationError('delegation.salt', `the delegation ${REPLAYED}`);

      const sessionId = randomUUID();
      try {
        await insertSession(store, {
          id: sessionId,
          wallet: delegator,
          delegation: JSON.stringify(accepted.delegation),
          delegationHash,
          signature,
          limits: JSON.stringify(accepted.limits),
          expiresAt: accepted.expiresAt,
          createdAt: now,
        });
      } catch (error) {
        // Two requests with one delegation at once: the unique hash lets one through.
        if (await findSessionByDelegationHash(store, delegationHash))
          throw validationError('delegation.salt', `the delegation ${REPLAYED}`);
        throw error;
      }
      return { sessionId, wallet: delegator, expiresAt: accepted.expiresAt, limits: accepted.limits };
    },
  };
}

function notTheSignature(): GatewayError {
  return new GatewayError(
    'unauthorized',
    "x-authorization-signature is not the delegator's signature of this delegation",
  );
}

function redeemableOrRefused(signature: Hex): RedeemableSignature {
  try {
    return redeemableSignature(signature);
  } catch {
    throw notTheSignature();
  }
}

/** 400 when deploying the account would cost the gateway more than its gas cap. */
async function checkDeploymentGas(chain: ChainClient, deployment: PendingDeployment): Promise<void> {
  const gas = await onChain(() =>
    chain.publicClient
      .estimateGas({ account: chain.relayer.address, to: deployment.factory, data: deployment.factoryData })
      .catch((error: unknown) => {
        if (isTransportFailure(error)) throw error;
        return undefined;
      }),
  );
  if (gas === undefined)
    throw validationError('x-authorization-signature', 'deploys an account that cannot be deployed');
  if (gas > GAS_CAPS.deployment)
    throw validationError(
      'x-authorization-signature',
      `deploys an account needing ${gas} gas to deploy; the gateway deploys smart accounts of at most ${GAS_CAPS.deployment}`,
    );
}

async function onChain<T>(read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (error) {
    throw new GatewayError('payments_unavailable', 'the chain cannot be read right now; try again shortly', {
      details: { reason: chainErrorReason(error) },
    });
  }
}
