import { decodePaymentSignatureHeader } from '@x402/core/http';
import type { PaymentPayload } from '@x402/core/types';
import { type Address, concat, type Hash, toHex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { describe, expect, test } from 'vitest';
import { mintUsdc } from '../../devkit/chain/index.js';
import { artifact as gasHungryDelegator } from '../../devkit/contracts/artifacts/GasHungryDelegator.js';
import { artifact as inertDelegator } from '../../devkit/contracts/artifacts/InertDelegator.js';
import type { ContractArtifact } from '../../devkit/contracts/compile.js';
import { recordUsages } from '../../src/billing/ledger.js';
import { settlementsOf } from '../../src/billing/settlements.js';
import { createChainClient } from '../../src/payments/chain/chain-client.js';
import { GAS_CAPS } from '../../src/payments/chain/gas-caps.js';
import { inProcessFacilitator } from '../../src/payments/x402/facilitator.js';
import { completedRequest } from '../support/usage-entries.js';
import {
  chat,
  freshEoa,
  type PayerSigner,
  proofFor,
  SMALL_COST,
  sendProof,
  settlementOf,
  useX402Stack,
} from './harness.js';

const stack = useX402Stack();

// Its signature check burns gas: a settlement from it cost the relayer 12,516,110 gas uncapped (anvil).
const HUNGRY_ROUNDS = 30_000n;

async function deployed(contract: ContractArtifact, args: readonly unknown[]): Promise<Address> {
  const { local } = stack;
  const hash = await local.deployer.deployContract({ abi: contract.abi, bytecode: contract.bytecode, args });
  return (await local.publicClient.waitForTransactionReceipt({ hash })).contractAddress as Address;
}

/**
 * A contract payer holding USDC that accepts any signature (ERC-1271), owing SMALL_COST as if its
 * requests had been served: the "signature" is 100 bytes, so the token checks it with the contract.
 */
async function contractPayerOwing(
  contract: ContractArtifact,
  args: readonly unknown[],
): Promise<PayerSigner> {
  const address = await deployed(contract, args);
  await mintUsdc(stack.local, address, 1_000_000n);
  await recordUsages(stack.gateway.store, [
    completedRequest(address, SMALL_COST * 1_000_000n, { rail: 'x402' }),
  ]);
  const signature = toHex(new Uint8Array(100).fill(0x11));
  return { address, signTypedData: async () => signature };
}

/** What the relayer sent and holds: any transaction it sends moves the nonce and spends ETH. */
async function relayerState() {
  const address = stack.local.accounts.gateway.address;
  const [nonce, wei] = await Promise.all([
    stack.local.publicClient.getTransactionCount({ address, blockTag: 'pending' }),
    stack.local.publicClient.getBalance({ address }),
  ]);
  return { nonce, wei };
}

describe('a contract payer that is not a MetaMask smart account', () => {
  test.each([
    ['whose signature check burns gas', gasHungryDelegator, [HUNGRY_ROUNDS]],
    ['of an unknown implementation that pays nothing', inertDelegator, []],
  ] as const)(
    '%s is refused at verification, before the relayer spends any gas',
    async (_, contract, args) => {
      const payer = await contractPayerOwing(contract, args);
      const before = await relayerState();

      const response = await sendProof(stack, 'PAYMENT-SIGNATURE', await proofFor(stack, payer, SMALL_COST));

      expect(await relayerState()).toEqual(before);
      expect(await settlementsOf(stack.gateway.store, payer.address)).toEqual([]);
      expect(response.status).toBe(402);
      const body = (await response.json()) as { error: { message: string } };
      expect(body.error.message).toMatch(/unsupported_payer/);
      expect(body.error.message).toMatch(/not a MetaMask smart account of the Delegation Framework/);
    },
  );
});

describe('an EOA upgraded with EIP-7702', () => {
  test("pays while it delegates to the framework's stateless DeleGator; delegating to another contract, it is refused before any gas", async () => {
    const { local } = stack;
    const owner = await freshEoa(stack, 1_000_000n);
    const delegateTo = (contract: Address) =>
      local.testClient.setCode({ address: owner.address, bytecode: concat(['0xef0100', contract]) });
    await delegateTo(local.environment.implementations.EIP7702StatelessDeleGatorImpl as Address);
    await chat(stack, owner);
    const paid = await chat(stack, owner);
    expect(settlementOf(paid.headers)).toMatchObject({ success: true, payer: owner.address });
    expect(settlementOf(paid.headers).transaction).toMatch(/^0x[0-9a-f]{64}$/);

    await delegateTo(await deployed(gasHungryDelegator, [HUNGRY_ROUNDS]));
    const before = await relayerState();
    const refused = await sendProof(stack, 'PAYMENT-SIGNATURE', await proofFor(stack, owner, SMALL_COST));

    expect(await relayerState()).toEqual(before);
    expect(refused.status).toBe(402);
    expect(((await refused.json()) as { error: { message: string } }).error.message).toMatch(
      /unsupported_payer/,
    );
  });
});

describe('the gas cap of an x402 settlement', () => {
  test('a proof whose transfer needs more gas than the cap is refused by the facilitator unsent', async () => {
    // The verification above refuses such a payer; an account can change its code since (EIP-7702).
    const payer = await contractPayerOwing(gasHungryDelegator, [HUNGRY_ROUNDS]);
    const payment = decodePaymentSignatureHeader(await proofFor(stack, payer, SMALL_COST)) as PaymentPayload;
    const facilitator = inProcessFacilitator(createChainClient(stack.gateway.config.chain));
    const before = await relayerState();
    const announced: Hash[] = [];

    const result = await facilitator.settle(payment, payment.accepted, async (hash) => {
      announced.push(hash);
    });

    expect(result.success).toBe(false);
    expect(result.errorMessage).toMatch(
      new RegExp(
        `needs \\d+ gas; the gateway spends at most ${GAS_CAPS.x402Settlement} on an x402 settlement`,
      ),
    );
    expect(announced).toEqual([]);
    expect(await relayerState()).toEqual(before);
  });

  test('a settlement within the cap is sent with a gas limit no higher than the cap', async () => {
    const { local } = stack;
    const payer = privateKeyToAccount(generatePrivateKey());
    await mintUsdc(local, payer.address, 1_000_000n);
    const payment = decodePaymentSignatureHeader(await proofFor(stack, payer, SMALL_COST)) as PaymentPayload;
    const facilitator = inProcessFacilitator(createChainClient(stack.gateway.config.chain));
    const announced: Hash[] = [];

    const result = await facilitator.settle(payment, payment.accepted, async (hash) => {
      announced.push(hash);
    });

    expect(result.success).toBe(true);
    const [hash] = announced as [Hash];
    const [sent, receipt] = await Promise.all([
      local.publicClient.getTransaction({ hash }),
      local.publicClient.getTransactionReceipt({ hash }),
    ]);
    expect(sent.gas).toBeLessThanOrEqual(GAS_CAPS.x402Settlement);
    expect(receipt.gasUsed).toBeLessThanOrEqual(GAS_CAPS.x402Settlement);
  });
});
