import { x402Facilitator } from '@x402/core/facilitator';
import type { PaymentPayload, PaymentRequirements } from '@x402/core/types';
import { toFacilitatorEvmSigner, x402UptoPermit2ProxyAddress } from '@x402/evm';
import { UptoEvmScheme as UptoClientScheme } from '@x402/evm/upto/client';
import { UptoEvmScheme as UptoFacilitatorScheme } from '@x402/evm/upto/facilitator';
import { type Address, hashDomain, keccak256, maxUint256, publicActions } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, expect, test } from 'vitest';
import {
  createLocalChain,
  createLocalWalletClient,
  type LocalChain,
  mintUsdc,
  testUsdcAbi,
  testUsdcEip712,
  usdcBalance,
} from '../../devkit/chain/index.js';
import { permit2Address, permit2CodeHash } from '../../devkit/contracts/permit2.js';

let local: LocalChain;
beforeAll(async () => {
  local = await createLocalChain();
});
afterAll(() => local?.stop());

const domainSeparatorAbi = [
  {
    type: 'function',
    name: 'DOMAIN_SEPARATOR',
    inputs: [],
    outputs: [{ type: 'bytes32' }],
    stateMutability: 'view',
  },
] as const;

test('Permit2 is at its canonical address with the committed code, signing under this chain', async () => {
  const code = await local.publicClient.getCode({ address: permit2Address });
  expect(code && keccak256(code)).toBe(permit2CodeHash);
  const separator = await local.publicClient.readContract({
    address: permit2Address,
    abi: domainSeparatorAbi,
    functionName: 'DOMAIN_SEPARATOR',
  });
  expect(separator).toBe(
    hashDomain({
      domain: { name: 'Permit2', chainId: BigInt(local.chainId), verifyingContract: permit2Address },
      types: {
        EIP712Domain: [
          { name: 'name', type: 'string' },
          { name: 'chainId', type: 'uint256' },
          { name: 'verifyingContract', type: 'address' },
        ],
      },
    }),
  );
});

test('an upto payment signed by the stock client moves the amount its facilitator settles, up to the maximum, once', async () => {
  const payer = privateKeyToAccount(local.accounts.payers[0]!.privateKey);
  const treasury = local.accounts.payers[1]!.address as Address;
  const facilitatorKey = local.accounts.payers[2]!;
  await mintUsdc(local, payer.address, 1_000_000n);
  const payerWallet = createLocalWalletClient(local.chain, local.accounts.payers[0]!.privateKey);
  const approval = await payerWallet.writeContract({
    address: local.usdc,
    abi: testUsdcAbi,
    functionName: 'approve',
    args: [permit2Address, maxUint256],
  });
  await local.publicClient.waitForTransactionReceipt({ hash: approval });

  const facilitatorWallet = createLocalWalletClient(local.chain, facilitatorKey.privateKey).extend(
    publicActions,
  );
  const facilitator = new x402Facilitator().register(
    `eip155:${local.chainId}`,
    new UptoFacilitatorScheme(
      toFacilitatorEvmSigner({ ...facilitatorWallet, address: facilitatorWallet.account.address } as never),
    ),
  );
  const requirements: PaymentRequirements = {
    scheme: 'upto',
    network: `eip155:${local.chainId}`,
    asset: local.usdc,
    amount: '5000',
    payTo: treasury,
    maxTimeoutSeconds: 600,
    extra: {
      ...testUsdcEip712,
      assetTransferMethod: 'permit2',
      facilitatorAddress: facilitatorWallet.account.address,
    },
  };
  const created = await new UptoClientScheme(payer).createPaymentPayload(2, requirements);
  const payload = { ...created, accepted: requirements } as PaymentPayload;
  expect(
    (payload.payload as { permit2Authorization: { spender: string } }).permit2Authorization.spender,
  ).toBe(x402UptoPermit2ProxyAddress);
  expect(await facilitator.verify(payload, requirements)).toMatchObject({
    isValid: true,
    payer: payer.address,
  });

  const before = await usdcBalance(local, treasury);
  const settled = await facilitator.settle(payload, { ...requirements, amount: '1234' });
  expect(settled).toMatchObject({ success: true });
  expect((await usdcBalance(local, treasury)) - before).toBe(1234n);
  const again = await facilitator.settle(payload, { ...requirements, amount: '1' });
  expect(again.success).toBe(false);
  expect((await usdcBalance(local, treasury)) - before).toBe(1234n);
});
