/**
 * The gateway's session-key client, for Node and the browser (no Node-only imports):
 * fetch the terms, build and sign a session delegation with a MetaMask smart account,
 * and trade it for an access token to use as the OpenAI client's apiKey.
 */
export {
  type AuthorizeSessionOptions,
  type AuthorizeWithSmartAccountOptions,
  authorizeSession,
  authorizeWithSmartAccount,
  buildSessionDelegation,
  fetchTerms,
  GatewayError,
  revokeSession,
  type SessionDelegationOptions,
  SIGNATURE_HEADER,
  signSessionDelegation,
  type UnsignedDelegation,
} from './session-client.js';
export type {
  AcceptedEnforcer,
  AuthorizedSession,
  RevokedSession,
  SessionLimits,
  SessionTerms,
} from './types.js';
