import { type Address, concat } from 'viem';
import { expect, test } from 'vitest';
import { artifact as gasHungryDelegator } from '../../devkit/contracts/artifacts/GasHungryDelegator.js';
import { debtOf } from '../../src/billing/ledger.js';
import { GAS_CAPS } from '../../src/payments/chain/gas-caps.js';
import { chat, freshEoa, proofFor, SMALL_COST, sendProof, useX402Stack } from './harness.js';

// The gateway reaches the chain through a proxy: the test holds its calls at the step it aims at.
const stack = useX402Stack({ rpcProxy: true });

/** The relayer's nonce and ETH: any transaction it sends moves both. */
async function relayerState() {
  const address = stack.local.accounts.gateway.address;
  const [nonce, wei] = await Promise.all([
    stack.local.publicClient.getTransactionCount({ address, blockTag: 'pending' }),
    stack.local.publicClient.getBalance({ address }),
  ]);
  return { nonce, wei };
}

test('an EOA that re-delegates (EIP-7702) to a gas-burning contract after its proof was verified: 402 naming the gas cap, and the relayer sends nothing', async () => {
  const { local, rpc } = stack;
  const owner = await freshEoa(stack, 1_000_000n);
  const delegateTo = (contract: Address) =>
    local.testClient.setCode({ address: owner.address, bytecode: concat(['0xef0100', contract]) });
  await delegateTo(local.environment.implementations.EIP7702StatelessDeleGatorImpl as Address);
  await chat(stack, owner);
  const hash = await local.deployer.deployContract({
    abi: gasHungryDelegator.abi,
    bytecode: gasHungryDelegator.bytecode,
    args: [30_000n],
  });
  const hungry = (await local.publicClient.waitForTransactionReceipt({ hash })).contractAddress as Address;
  const before = await relayerState();

  // Verified as a stateless DeleGator; held at the settlement's gas estimate while the owner re-delegates.
  const heldAtEstimate = rpc!.stallFrom('eth_estimateGas');
  const answer = sendProof(stack, 'PAYMENT-SIGNATURE', await proofFor(stack, owner, SMALL_COST));
  await heldAtEstimate;
  await delegateTo(hungry);
  rpc!.pass();
  const refused = await answer;

  expect(refused.status).toBe(402);
  const body = (await refused.json()) as { error: { message: string } };
  expect(body.error.message).toMatch(
    new RegExp(`needs \\d+ gas; the gateway spends at most ${GAS_CAPS.x402Settlement} on an x402 settlement`),
  );
  expect(await relayerState()).toEqual(before);
  expect((await debtOf(stack.gateway.store, owner.address)).owedAtomic).toBe(SMALL_COST);
});
