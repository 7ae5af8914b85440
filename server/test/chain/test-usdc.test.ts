import { type Address, keccak256, maxUint256, toHex, zeroHash } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  createLocalChain,
  createLocalWalletClient,
  createPayerAccount,
  type LocalChain,
  type LocalWalletClient,
  mintUsdc,
  type PayerAccount,
  testUsdcAbi,
  usdcBalance,
} from '../../devkit/chain/index.js';
import {
  signCancelAuthorization,
  signTransferAuthorization,
  splitSignature,
  type TransferAuthorization,
  transferAuthorization,
  usdcDomain,
} from './authorizations.js';

let local: LocalChain;
let relayer: LocalWalletClient;
let payerEoa: ReturnType<typeof privateKeyToAccount>;
let smartPayer: PayerAccount;
let treasury: Address;

beforeAll(async () => {
  local = await createLocalChain();
  relayer = createLocalWalletClient(local.chain, local.accounts.gateway.privateKey);
  treasury = local.accounts.treasury.address;
  payerEoa = privateKeyToAccount(local.accounts.payers[0]!.privateKey);
  [smartPayer] = await Promise.all([
    createPayerAccount(local, local.accounts.payers[1]!.privateKey, { fundUsdc: 50_000_000n }),
    mintUsdc(local, payerEoa.address, 50_000_000n),
  ]);
});
afterAll(() => local?.stop());

const read = <F extends 'name' | 'symbol' | 'decimals' | 'version' | 'owner'>(functionName: F) =>
  local.publicClient.readContract({ address: local.usdc, abi: testUsdcAbi, functionName });

/** Sends a transferWithAuthorization through the relayer, in the (v, r, s) or the bytes form. */
async function relayTransfer(auth: TransferAuthorization, signature: `0x${string}`, form: 'vrs' | 'bytes') {
  const base = [auth.from, auth.to, auth.value, auth.validAfter, auth.validBefore, auth.nonce] as const;
  const hash =
    form === 'vrs'
      ? await relayer.writeContract({
          address: local.usdc,
          abi: testUsdcAbi,
          functionName: 'transferWithAuthorization',
          args: [...base, ...splitSignature(signature)],
        })
      : await relayer.writeContract({
          address: local.usdc,
          abi: testUsdcAbi,
          functionName: 'transferWithAuthorization',
          args: [...base, signature],
        });
  return local.publicClient.waitForTransactionReceipt({ hash });
}

describe('metadata', () => {
  test('it looks like USDC: name, symbol, 6 decimals, EIP-712 domain "USD Coin" version "2"', async () => {
    expect(await read('name')).toBe('USD Coin');
    expect(await read('symbol')).toBe('USDC');
    expect(await read('decimals')).toBe(6);
    expect(await read('version')).toBe('2');
    expect(await read('owner')).toBe(local.accounts.deployer.address);
    const domain = await local.publicClient.getEip712Domain({ address: local.usdc });
    expect(domain.domain).toEqual({ ...usdcDomain(local), salt: zeroHash });
  });

  test('its type hashes are USDC v2.2 constants', async () => {
    const constant = (
      functionName:
        | 'PERMIT_TYPEHASH'
        | 'TRANSFER_WITH_AUTHORIZATION_TYPEHASH'
        | 'RECEIVE_WITH_AUTHORIZATION_TYPEHASH'
        | 'CANCEL_AUTHORIZATION_TYPEHASH',
    ) => local.publicClient.readContract({ address: local.usdc, abi: testUsdcAbi, functionName });
    expect(await constant('TRANSFER_WITH_AUTHORIZATION_TYPEHASH')).toBe(
      '0x7c7c6cdb67a18743f49ec6fa9b35f50d52ed05cbed4cc592e13b44501c1a2267',
    );
    expect(await constant('RECEIVE_WITH_AUTHORIZATION_TYPEHASH')).toBe(
      '0xd099cc98ef71107a616c4f0f941f04c322d8e254fe26b3c6668db87aae413de8',
    );
    expect(await constant('CANCEL_AUTHORIZATION_TYPEHASH')).toBe(
      '0x158b0a9edf7a828aad02f63cd515c68ef2f50ba807396f6d12842833a1597429',
    );
    expect(await constant('PERMIT_TYPEHASH')).toBe(
      '0x6e71edae12b1b97f4d1f60370fef10105fa2faae0126114a169c64845d6126c9',
    );
  });
});

describe('mint', () => {
  test('the owner mints exactly the amount', async () => {
    const to = privateKeyToAccount(keccak256(toHex('mint target'))).address;
    await mintUsdc(local, to, 1_234_567n);
    expect(await usdcBalance(local, to)).toBe(1_234_567n);
  });

  test('anyone else is refused', async () => {
    await expect(
      relayer.writeContract({
        address: local.usdc,
        abi: testUsdcAbi,
        functionName: 'mint',
        args: [relayer.account.address, 1n],
      }),
    ).rejects.toThrow(/OwnableUnauthorizedAccount/);
  });
});

describe('EIP-2612 permit', () => {
  const permitTypes = {
    Permit: [
      { name: 'owner', type: 'address' },
      { name: 'spender', type: 'address' },
      { name: 'value', type: 'uint256' },
      { name: 'nonce', type: 'uint256' },
      { name: 'deadline', type: 'uint256' },
    ],
  } as const;
  const nonceOf = (owner: Address) =>
    local.publicClient.readContract({
      address: local.usdc,
      abi: testUsdcAbi,
      functionName: 'nonces',
      args: [owner],
    });
  const allowanceOf = (owner: Address, spender: Address) =>
    local.publicClient.readContract({
      address: local.usdc,
      abi: testUsdcAbi,
      functionName: 'allowance',
      args: [owner, spender],
    });

  test('an EOA signature sets the allowance once; the same signature cannot be replayed', async () => {
    const spender = relayer.account.address;
    const message = {
      owner: payerEoa.address,
      spender,
      value: 7_000_000n,
      nonce: await nonceOf(payerEoa.address),
    };
    const permit = { ...message, deadline: maxUint256 };
    const signature = await payerEoa.signTypedData({
      domain: usdcDomain(local),
      types: permitTypes,
      primaryType: 'Permit',
      message: permit,
    });
    const args = [
      permit.owner,
      permit.spender,
      permit.value,
      permit.deadline,
      ...splitSignature(signature),
    ] as const;
    const hash = await relayer.writeContract({
      address: local.usdc,
      abi: testUsdcAbi,
      functionName: 'permit',
      args,
    });
    await local.publicClient.waitForTransactionReceipt({ hash });
    expect(await allowanceOf(payerEoa.address, spender)).toBe(7_000_000n);
    expect(await nonceOf(payerEoa.address)).toBe(message.nonce + 1n);
    await expect(
      relayer.writeContract({ address: local.usdc, abi: testUsdcAbi, functionName: 'permit', args }),
    ).rejects.toThrow('EIP2612: invalid signature');
  });

  test('a smart account signs through ERC-1271 (bytes overload)', async () => {
    const spender = relayer.account.address;
    const permit = {
      owner: smartPayer.address,
      spender,
      value: 3_000_000n,
      nonce: await nonceOf(smartPayer.address),
      deadline: maxUint256,
    };
    const signature = await smartPayer.account.signTypedData({
      domain: usdcDomain(local),
      types: permitTypes,
      primaryType: 'Permit',
      message: permit,
    });
    const hash = await relayer.writeContract({
      address: local.usdc,
      abi: testUsdcAbi,
      functionName: 'permit',
      args: [permit.owner, permit.spender, permit.value, permit.deadline, signature],
    });
    await local.publicClient.waitForTransactionReceipt({ hash });
    expect(await allowanceOf(smartPayer.address, spender)).toBe(3_000_000n);
  });

  test('an expired permit is refused', async () => {
    const permit = {
      owner: payerEoa.address,
      spender: relayer.account.address,
      value: 1n,
      nonce: await nonceOf(payerEoa.address),
      deadline: 1n,
    };
    const signature = await payerEoa.signTypedData({
      domain: usdcDomain(local),
      types: permitTypes,
      primaryType: 'Permit',
      message: permit,
    });
    await expect(
      relayer.writeContract({
        address: local.usdc,
        abi: testUsdcAbi,
        functionName: 'permit',
        args: [permit.owner, permit.spender, permit.value, permit.deadline, signature],
      }),
    ).rejects.toThrow('FiatTokenV2: permit is expired');
  });
});

describe('EIP-3009 transferWithAuthorization', () => {
  test.each(['vrs', 'bytes'] as const)(
    'an EOA-signed authorization (%s form) moves the exact value once',
    async (form) => {
      const auth = transferAuthorization(payerEoa.address, treasury, 1_500_001n);
      const signature = await signTransferAuthorization(local, payerEoa, auth);
      const [payerBefore, treasuryBefore] = await Promise.all([
        usdcBalance(local, payerEoa.address),
        usdcBalance(local, treasury),
      ]);

      const receipt = await relayTransfer(auth, signature, form);

      expect(receipt.status).toBe('success');
      expect(await usdcBalance(local, payerEoa.address)).toBe(payerBefore - 1_500_001n);
      expect(await usdcBalance(local, treasury)).toBe(treasuryBefore + 1_500_001n);
      expect(
        await local.publicClient.readContract({
          address: local.usdc,
          abi: testUsdcAbi,
          functionName: 'authorizationState',
          args: [auth.from, auth.nonce],
        }),
      ).toBe(true);
      await expect(relayTransfer(auth, signature, form)).rejects.toThrow(
        'FiatTokenV2: authorization is used or canceled',
      );
    },
  );

  test.each(['vrs', 'bytes'] as const)(
    'a HybridDeleGator smart account signs through ERC-1271 (%s form)',
    async (form) => {
      const auth = transferAuthorization(smartPayer.address, treasury, 2_000_000n);
      const signature = await signTransferAuthorization(local, smartPayer.account, auth);
      const before = await usdcBalance(local, smartPayer.address);

      await relayTransfer(auth, signature, form);

      expect(await usdcBalance(local, smartPayer.address)).toBe(before - 2_000_000n);
    },
  );

  test('a signature by someone other than `from` is refused', async () => {
    const auth = transferAuthorization(smartPayer.address, treasury, 1n);
    const signature = await signTransferAuthorization(local, payerEoa, auth);
    await expect(relayTransfer(auth, signature, 'bytes')).rejects.toThrow('FiatTokenV2: invalid signature');
  });

  test('the validity window is enforced', async () => {
    const expired = { ...transferAuthorization(payerEoa.address, treasury, 1n), validBefore: 1n };
    await expect(
      relayTransfer(expired, await signTransferAuthorization(local, payerEoa, expired), 'vrs'),
    ).rejects.toThrow('FiatTokenV2: authorization is expired');
    const early = { ...transferAuthorization(payerEoa.address, treasury, 1n), validAfter: 2n ** 40n };
    await expect(
      relayTransfer(early, await signTransferAuthorization(local, payerEoa, early), 'vrs'),
    ).rejects.toThrow('FiatTokenV2: authorization is not yet valid');
  });
});

describe('EIP-3009 receiveWithAuthorization and cancelAuthorization', () => {
  test('only the payee can submit a receive authorization', async () => {
    const auth = transferAuthorization(payerEoa.address, relayer.account.address, 250_000n);
    const signature = await signTransferAuthorization(local, payerEoa, auth, 'ReceiveWithAuthorization');
    const args = [
      auth.from,
      auth.to,
      auth.value,
      auth.validAfter,
      auth.validBefore,
      auth.nonce,
      signature,
    ] as const;
    const deployer = local.deployer;
    await expect(
      deployer.writeContract({
        address: local.usdc,
        abi: testUsdcAbi,
        functionName: 'receiveWithAuthorization',
        args,
      }),
    ).rejects.toThrow('FiatTokenV2: caller must be the payee');

    const hash = await relayer.writeContract({
      address: local.usdc,
      abi: testUsdcAbi,
      functionName: 'receiveWithAuthorization',
      args,
    });
    await local.publicClient.waitForTransactionReceipt({ hash });
    expect(await usdcBalance(local, relayer.account.address)).toBe(250_000n);
  });

  test('a canceled authorization can no longer be used', async () => {
    const auth = transferAuthorization(payerEoa.address, treasury, 1n);
    const cancellation = await signCancelAuthorization(local, payerEoa, auth);
    const hash = await relayer.writeContract({
      address: local.usdc,
      abi: testUsdcAbi,
      functionName: 'cancelAuthorization',
      args: [auth.from, auth.nonce, ...splitSignature(cancellation)],
    });
    await local.publicClient.waitForTransactionReceipt({ hash });
    await expect(
      relayTransfer(auth, await signTransferAuthorization(local, payerEoa, auth), 'vrs'),
    ).rejects.toThrow('FiatTokenV2: authorization is used or canceled');
  });
});
