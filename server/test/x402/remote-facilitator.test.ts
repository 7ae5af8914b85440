import { HTTPFacilitatorClient } from '@x402/core/http';
import type { Hash } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { beforeAll, expect, test } from 'vitest';
import { usdcBalance } from '../../devkit/chain/index.js';
import type { FacilitatorServer } from '../../devkit/facilitator.js';
import {
  chat,
  chatBody,
  fundedEoa,
  openaiClient,
  payingClient,
  payingFetch,
  SMALL_COST,
  settlementOf,
  useX402Stack,
} from './harness.js';

const stack = useX402Stack({ remoteFacilitator: true });
let facilitator: FacilitatorServer;

beforeAll(() => {
  facilitator = stack.facilitator!;
});

test('the facilitator server answers /supported with the exact scheme on the local chain', async () => {
  const supported = await new HTTPFacilitatorClient({ url: facilitator.url }).getSupported();
  expect(supported.kinds).toContainEqual({ x402Version: 2, scheme: 'exact', network: 'eip155:31337' });
  expect(supported.signers['eip155:*']).toEqual([facilitator.address]);
});

test('with FACILITATOR_URL the remote facilitator verifies and settles, and the gateway relayer sends nothing', async () => {
  const { local } = stack;
  const payer = await fundedEoa(stack, 5, 1_000_000n);
  const relayer = local.accounts.gateway.address;
  const relayerNonce = await local.publicClient.getTransactionCount({ address: relayer });
  facilitator.calls.length = 0;

  const first = await chat(stack, payer);
  expect(settlementOf(first.headers)).toMatchObject({ success: true, transaction: '' });
  expect(facilitator.calls).toEqual(['/verify']);

  const before = await usdcBalance(local, payer.address);
  const second = await chat(stack, payer);
  expect(second.exchanges.map((e) => e.status)).toEqual([402, 402, 200]);
  const settlement = settlementOf(second.headers);
  expect(settlement).toMatchObject({ success: true, network: 'eip155:31337', payer: payer.address });
  const transaction = await local.publicClient.getTransaction({ hash: settlement.transaction as Hash });
  expect(transaction.from.toLowerCase()).toBe(facilitator.address.toLowerCase());
  expect(await usdcBalance(local, payer.address)).toBe(before - SMALL_COST);
  expect(facilitator.calls.slice(1)).toEqual(['/verify', '/verify', '/settle']);
  expect(await local.publicClient.getTransactionCount({ address: relayer })).toBe(relayerNonce);
});

test('an unreachable facilitator is 503 with retry-after, not a 402 or a 500', async () => {
  await facilitator.close();
  const payer = privateKeyToAccount(stack.local.accounts.payers[5]!.privateKey);
  const openai = openaiClient(stack.gateway.url, payingFetch(payingClient(stack.local, payer)));
  const error = await openai.chat.completions.create(chatBody).catch((e: unknown) => e);
  expect(error).toMatchObject({ status: 503, error: { code: 'payments_unavailable' } });
  expect((error as { headers: Headers }).headers.get('retry-after')).toBe('3');
});
