import { authorizationTypes } from '@x402/evm';
import {
  type Address,
  encodeFunctionData,
  type Hex,
  parseEventLogs,
  parseSignature,
  type TransactionReceipt,
  toHex,
} from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import {
  type LocalChain,
  type LocalWalletClient,
  mintUsdc,
  testUsdcAbi,
  testUsdcEip712,
} from '../../devkit/chain/index.js';
import { aggregate3Calldata, MULTICALL3_ADDRESS } from '../../src/payments/chain/index.js';

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

/**
 * `payers` fresh EOAs holding 1 USDC each authorize `value` to `to`, and `sender` settles them in one
 * transaction as the gateway's relayer does: one alone to the token, several in one Multicall3
 * `aggregate3` with allowFailure, each in the (v, r, s) form x402 sends for an EOA. Throws unless the
 * receipt holds every transfer (with allowFailure, one that fails does not revert the transaction).
 */
export async function settleFreshAuthorizations(
  local: LocalChain,
  sender: LocalWalletClient,
  payers: number,
  to: Address,
  value: bigint,
): Promise<{ receipt: TransactionReceipt; data: Hex }> {
  const calls = await Promise.all(
    Array.from({ length: payers }, async () => {
      const payer = privateKeyToAccount(generatePrivateKey());
      await mintUsdc(local, payer.address, 1_000_000n);
      const authorization = transferAuthorization(payer.address, to, value);
      const { from, validAfter, validBefore, nonce } = authorization;
      const signature = await signTransferAuthorization(local, payer, authorization);
      return {
        to: local.usdc,
        data: encodeFunctionData({
          abi: testUsdcAbi,
          functionName: 'transferWithAuthorization',
          args: [from, to, value, validAfter, validBefore, nonce, ...splitSignature(signature)],
        }),
      };
    }),
  );
  const [only] = calls;
  const call =
    only && calls.length === 1 ? only : { to: MULTICALL3_ADDRESS, data: aggregate3Calldata(calls, true) };
  const hash = await sender.sendTransaction(call);
  const receipt = await local.publicClient.waitForTransactionReceipt({ hash });
  const transfers = parseEventLogs({ abi: testUsdcAbi, logs: receipt.logs, eventName: 'Transfer' });
  if (receipt.status !== 'success' || transfers.length !== payers)
    throw new Error(`${transfers.length} of ${payers} authorizations settled (${hash})`);
  return { receipt, data: call.data };
}
