import type { Delegation } from '@metamask/smart-accounts-kit';
import type { FastifyInstance } from 'fastify';
import { type Hex, isHex } from 'viem';
import { authenticateCaller, type CallerChecks, issueAccessToken } from '../auth/jwt.js';
import { type SessionTerms, SIGNATURE_HEADER } from '../client/types.js';
import type { SessionAuthorizer } from '../payments/session/index.js';
import { success } from './envelope.js';
import { ApiError, validationError } from './errors.js';

export interface AuthorizeRouteOptions {
  authorizer: SessionAuthorizer;
  /** What a client needs to build the delegation (GET). */
  terms(): Promise<SessionTerms>;
  /** How DELETE checks the access token. */
  checks: CallerChecks;
  /** Ends a session: its token is refused from now on. */
  revoke(sessionId: string): Promise<void>;
  /** What the payer still owes (USDC atomic units), reported when its session is revoked. */
  owedAtomic(wallet: Hex): Promise<bigint>;
}

interface AuthorizeBody {
  chainId: number;
  delegation: Omit<Delegation, 'signature'> & { signature?: Hex };
}

const address = {
  type: 'string',
  pattern: '^0x[0-9a-fA-F]{40}$',
  description: 'a 0x-prefixed 20-byte address',
};
const bytes = {
  type: 'string',
  pattern: '^0x([0-9a-fA-F]{2})*$',
  maxLength: 4098,
  description: '0x-prefixed hex bytes',
};

const bodySchema = {
  type: 'object',
  required: ['chainId', 'delegation'],
  additionalProperties: false,
  properties: {
    chainId: { type: 'integer', minimum: 1 },
    delegation: {
      type: 'object',
      required: ['delegate', 'delegator', 'authority', 'caveats', 'salt'],
      additionalProperties: false,
      properties: {
        delegate: address,
        delegator: address,
        authority: {
          type: 'string',
          pattern: '^0x[0-9a-fA-F]{64}$',
          description: 'a 0x-prefixed 32-byte hash',
        },
        caveats: {
          type: 'array',
          minItems: 1,
          maxItems: 16,
          items: {
            type: 'object',
            required: ['enforcer', 'terms'],
            additionalProperties: false,
            properties: { enforcer: address, terms: bytes, args: bytes },
          },
        },
        salt: { type: 'string', pattern: '^0x[0-9a-fA-F]{1,64}$', description: 'a 0x-prefixed uint256' },
        signature: bytes,
      },
    },
  },
} as const;

/**
 * The session-key rail's front door: GET publishes the terms, POST turns a signed delegation into
 * a session and its access token, DELETE (with that token) revokes the session.
 */
export default async function authorizeRoute(app: FastifyInstance, options: AuthorizeRouteOptions) {
  app.get('/v1/authorize', async (request) => {
    const terms = await options.terms().catch(() => {
      throw new ApiError(
        503,
        'payments_unavailable',
        'the payment token cannot be read from the chain; retry shortly',
        {
          headers: { 'retry-after': '2' },
        },
      );
    });
    return success(terms, request.url);
  });

  app.post<{ Body: AuthorizeBody }>(
    '/v1/authorize',
    { schema: { body: bodySchema } },
    async (request, reply) => {
      const signature = signatureOf(request.headers[SIGNATURE_HEADER]);
      const { signature: inBody, ...delegation } = request.body.delegation;
      if (inBody !== undefined && inBody !== '0x' && inBody.toLowerCase() !== signature.toLowerCase())
        throw validationError(
          'delegation.signature',
          `must be "0x" or the ${SIGNATURE_HEADER} header's value`,
        );
      const session = await options.authorizer.authorize({
        chainId: request.body.chainId,
        delegation: {
          ...delegation,
          caveats: delegation.caveats.map((caveat) => ({ ...caveat, args: caveat.args ?? '0x' })),
        },
        signature,
      });
      const token = issueAccessToken(app, {
        wallet: session.wallet,
        sessionId: session.sessionId,
        expiresAt: session.expiresAt,
      });
      reply.code(201);
      return success(
        {
          token,
          sessionId: session.sessionId,
          wallet: session.wallet,
          expiresAt: session.expiresAt.toISOString(),
          limits: session.limits,
        },
        request.url,
      );
    },
  );

  app.delete('/v1/authorize', async (request) => {
    const caller = await authenticateCaller(request, options.checks);
    if (caller?.kind !== 'wallet')
      throw new ApiError(
        401,
        'unauthorized',
        'send the session access token as "Authorization: Bearer <token>"',
        {
          headers: { 'www-authenticate': 'Bearer' },
        },
      );
    await options.revoke(caller.sessionId);
    const owed = await options.owedAtomic(caller.wallet);
    return success(
      { sessionId: caller.sessionId, wallet: caller.wallet, revoked: true, owedAtomic: owed.toString() },
      request.url,
    );
  });
}

function signatureOf(header: string | string[] | undefined): Hex {
  if (header === undefined || header === '')
    throw new ApiError(
      401,
      'unauthorized',
      `send the delegation's EIP-712 signature in the ${SIGNATURE_HEADER} header`,
    );
  if (
    typeof header !== 'string' ||
    !isHex(header, { strict: true }) ||
    header.length < 4 ||
    header.length % 2 !== 0
  )
    throw validationError(SIGNATURE_HEADER, 'must be the signature as 0x-prefixed hex bytes');
  return header;
}
