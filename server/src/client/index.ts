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
  signSessionDelegation,
  termsOfAccount,
  type UnsignedDelegation,
} from './session-client.js';
export {
  type AcceptedEnforcer,
  type AuthorizedSession,
  type RevokedSession,
  type SessionLimits,
  type SessionTerms,
  SIGNATURE_HEADER,
} from './types.js';
