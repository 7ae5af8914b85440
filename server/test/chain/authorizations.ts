import { authorizationTypes } from '@x402/evm';
import { type Address, type Hex, parseSignature, toHex } from 'viem';
import { type LocalChain, testUsdcEip712 } from '../../devkit/chain/index.js';

/** Anything that signs EIP-712 typed data: an EOA (LocalAccount) or a smart account. */
export interface TypedDataSigner {
  signTypedData: (typedData: {
    domain: Record<string, unknown>;
    types: Record<string, readonly { name: string; type: string }[]>;
    primaryType: string;
    message: Record<string, unknown>;
  }) => Promise<Hex>;
}

export function usdcDomain(local: LocalChain) {
  return { ...testUsdcEip712, chainId: local.chainId, verifyingContract: local.usdc };
}

/** An authorization valid for the next hour with a fresh random nonce, as x402 clients make them. */
export function transferAuthorization(from: Address, to: Address, value: bigint) {
  const now = BigInt(Math.floor(Date.now() / 1000));
  const nonce: Hex = toHex(crypto.getRandomValues(new Uint8Array(32)));
  return { from, to, value, validAfter: 0n, validBefore: now + 3600n, nonce };
}

export type TransferAuthorization = ReturnType<typeof transferAuthorization>;

export function signTransferAuthorization(
  local: LocalChain,
  signer: TypedDataSigner,
  authorization: TransferAuthorization,
  primaryType: 'TransferWithAuthorization' | 'ReceiveWithAuthorization' = 'TransferWithAuthorization',
): Promise<Hex> {
  return signer.signTypedData({
    domain: usdcDomain(local),
    // x402's own definition of the struct, so the token is checked against what x402 clients sign.
    types: { [primaryType]: authorizationTypes.TransferWithAuthorization },
    primaryType,
    message: { ...authorization },
  });
}

/** The authorizer's EIP-3009 `CancelAuthorization` of one of its nonces. */
export function signCancelAuthorization(
  local: LocalChain,
  signer: TypedDataSigner,
  authorization: Pick<TransferAuthorization, 'from' | 'nonce'>,
): Promise<Hex> {
  return signer.signTypedData({
    domain: usdcDomain(local),
    types: {
      CancelAuthorization: [
        { name: 'authorizer', type: 'address' },
        { name: 'nonce', type: 'bytes32' },
      ],
    },
    primaryType: 'CancelAuthorization',
    message: { authorizer: authorization.from, nonce: authorization.nonce },
  });
}

/** The (v, r, s) form of a 65-byte signature, for the USDC overloads that take it. */
export function splitSignature(signature: Hex): [number, Hex, Hex] {
  const { v, yParity, r, s } = parseSignature(signature);
  return [Number(v ?? BigInt(yParity + 27)), r, s];
}
