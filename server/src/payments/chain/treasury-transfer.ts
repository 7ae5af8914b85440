import { type Address, erc20Abi, isAddressEqual, parseEventLogs, type TransactionReceipt } from 'viem';

/** A payment a settlement expects: `amount` of `token` from `payer` to `treasury`. */
export interface ExpectedTransfer {
  token: Address;
  payer: Address;
  treasury: Address;
  amount: bigint;
}

/**
 * Whether a mined transaction made the payment: a successful one that carries the token's
 * `Transfer(payer, treasury, amount)`. Success alone proves nothing: a contract that answers the
 * signature check but executes nothing makes a redemption succeed with no USDC moved, and an
 * authorization's nonce may be spent by a transaction paying someone else.
 */
export function paysTreasury(
  receipt: Pick<TransactionReceipt, 'status' | 'logs'>,
  expected: ExpectedTransfer,
): boolean {
  if (receipt.status !== 'success') return false;
  return parseEventLogs({ abi: erc20Abi, eventName: 'Transfer', logs: receipt.logs }).some(
    ({ address, args }) =>
      isAddressEqual(address, expected.token) &&
      isAddressEqual(args.from, expected.payer) &&
      isAddressEqual(args.to, expected.treasury) &&
      args.value === expected.amount,
  );
}
