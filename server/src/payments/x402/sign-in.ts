import type { IncomingHttpHeaders } from 'node:http';
import {
  buildSIWxSchema,
  parseSIWxHeader,
  SIGN_IN_WITH_X,
  type SIWxExtension,
  type SIWxPayload,
  validateSIWxMessage,
  verifySIWxSignature,
} from '@x402/extensions/sign-in-with-x';
import { type Address, getAddress, isAddress } from 'viem';
import { GatewayError } from '../../errors.js';
import type { Store } from '../../store/database.js';
import { type ChainClient, isTransportFailure } from '../chain/index.js';

/** The request header carrying a signed sign-in (x402 `sign-in-with-x`, CAIP-122). */
export const SIGN_IN_HEADER = SIGN_IN_WITH_X.toUpperCase();

// The package's own bound on a sign-in's age; a nonce is kept as long as a sign-in stays acceptable.
const SIGN_IN_MAX_AGE_MS = 5 * 60 * 1000;
const MAX_QUOTED = 200;
const STATEMENT = 'Sign in so the gateway states what this wallet owes for its completed requests';

/** What a request's sign-in says: none, the wallet it proves, or why it proves nothing. */
export type SignIn = { payer: Address } | { refused: string } | undefined;

/**
 * The origin the caller reached, as its client binds a sign-in to it (domain and URI). Read from
 * the request: a sign-in only makes the 402 state its wallet's debt, it never pays or serves.
 */
export function requestOrigin(headers: IncomingHttpHeaders): URL | undefined {
  const host = headers.host;
  if (!host) return undefined;
  const forwarded = String(headers['x-forwarded-proto'] ?? '')
    .split(',')[0]
    ?.trim();
  try {
    return new URL(`${forwarded === 'https' ? 'https' : 'http'}://${host}`);
  } catch {
    return undefined;
  }
}

/** A fresh sign-in challenge for PaymentRequired.extensions: a stock client signs it and asks again. */
export function signInChallenge(origin: URL, path: string, network: string): SIWxExtension {
  const uri = new URL(path, origin).toString();
  const issuedAt = new Date();
  return {
    info: {
      domain: origin.host,
      uri,
      statement: STATEMENT,
      version: '1',
      nonce: Array.from(crypto.getRandomValues(new Uint8Array(16)), (byte) =>
        byte.toString(16).padStart(2, '0'),
      ).join(''),
      issuedAt: issuedAt.toISOString(),
      expirationTime: new Date(issuedAt.getTime() + SIGN_IN_MAX_AGE_MS).toISOString(),
      resources: [uri],
    },
    supportedChains: [{ chainId: network, type: 'eip191' }],
    schema: buildSIWxSchema(),
  };
}

/**
 * Reads and checks the request's sign-in: its fields as the package validates them (domain and URI
 * of this origin, issued within 5 minutes, not expired), the gateway's chain, the signature (EOA, or
 * ERC-1271/ERC-6492 through the chain), and a nonce never used before. A header that is not a
 * sign-in at all is 400; one that proves nothing is `refused`, with the reason.
 */
export async function readSignIn(
  headers: IncomingHttpHeaders,
  deps: { store: Store; chain: ChainClient },
): Promise<SignIn> {
  const raw = headers[SIGN_IN_WITH_X];
  if (raw === undefined) return undefined;
  let payload: SIWxPayload;
  try {
    payload = parseSIWxHeader(String(raw));
  } catch (error) {
    throw new GatewayError(
      'validation_error',
      `${SIGN_IN_HEADER} ${(error as Error).message.replace(/^Invalid SIWX header: /, 'is not a sign-in: ')}`,
      { field: SIGN_IN_HEADER },
    );
  }
  const origin = requestOrigin(headers);
  if (!origin) return { refused: 'the request names no Host to bind the sign-in to' };
  if (payload.chainId !== deps.chain.network)
    return {
      refused: `it is for chain ${payload.chainId.slice(0, 80)}; this gateway signs in on ${deps.chain.network}`,
    };
  if (!isAddress(payload.address)) return { refused: 'its address is not an EVM address' };
  if (!/^0x(?:[0-9a-fA-F]{2})+$/.test(payload.signature))
    return { refused: 'invalid_siwx_malformed_signature: its signature is not 0x-prefixed hex' };
  if (!/^[0-9a-zA-Z]{8,64}$/.test(payload.nonce))
    return { refused: 'invalid_siwx_nonce: its nonce is not 8 to 64 letters and digits' };
  const validated = await validateSIWxMessage(payload, origin, { maxAge: SIGN_IN_MAX_AGE_MS });
  // The package's messages quote the sign-in's own fields: cut, so a long one cannot swell the 402.
  if (!validated.isValid)
    return { refused: `${validated.invalidReason}: ${validated.invalidMessage.slice(0, MAX_QUOTED)}` };
  let verified: Awaited<ReturnType<typeof verifySIWxSignature>>;
  try {
    verified = await verifySIWxSignature(payload, {
      // A node that cannot be reached is the verifier's error (503); any other failure is a bad signature.
      evmVerifier: (args) =>
        deps.chain.publicClient.verifyMessage(args).catch((error: unknown) => {
          if (isTransportFailure(error)) throw error;
          return false;
        }),
    });
  } catch (error) {
    // The EIP-4361 message could not be formed from the sign-in's fields.
    return { refused: `invalid_siwx_message: ${(error as Error).message.slice(0, MAX_QUOTED)}` };
  }
  if (!verified.isValid) {
    if (verified.invalidReason === 'invalid_siwx_verifier_error')
      throw new GatewayError(
        'payments_unavailable',
        'the sign-in cannot be checked on the chain; retry shortly',
        {
          headers: { 'retry-after': '3' },
        },
      );
    return { refused: `${verified.invalidReason}: ${verified.invalidMessage.slice(0, MAX_QUOTED)}` };
  }
  const payer = getAddress(payload.address);
  const issuedAt = new Date(payload.issuedAt).getTime();
  if (!(await useNonce(deps.store, payload.nonce, payer, issuedAt + SIGN_IN_MAX_AGE_MS)))
    return { refused: 'invalid_siwx_nonce: this sign-in was used before; sign the new challenge' };
  return { payer };
}

/** Records a sign-in's nonce; false when it was used before. Expired nonces are dropped first. */
async function useNonce(store: Store, nonce: string, address: Address, expiresAt: number): Promise<boolean> {
  await store.db.deleteFrom('siwx_nonces').where('expires_at', '<', BigInt(Date.now())).execute();
  const inserted = await store.db
    .insertInto('siwx_nonces')
    .values({ nonce, address, expires_at: expiresAt })
    .onConflict((conflict) => conflict.column('nonce').doNothing())
    .returning('nonce')
    .executeTakeFirst();
  return inserted !== undefined;
}
