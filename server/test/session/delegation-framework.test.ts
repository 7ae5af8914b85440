/**
 * The gateway's own Delegation Framework pieces (it does not load the kit at run time) against the
 * kit they stand in for: a kit upgrade that changes an encoding, a hash or a message fails here.
 */
import {
  contracts,
  createExecution,
  type Delegation,
  ExecutionMode,
  getSmartAccountsEnvironment,
  ROOT_AUTHORITY as KIT_ROOT_AUTHORITY,
} from '@metamask/smart-accounts-kit';
import {
  decodeCaveat,
  decodeRevertReason,
  SIGNABLE_DELEGATION_TYPED_DATA as KIT_TYPED_DATA,
  hashDelegation as kitHashDelegation,
  toDelegationStruct as kitToDelegationStruct,
} from '@metamask/smart-accounts-kit/utils';
import fc from 'fast-check';
import {
  type Address,
  BaseError,
  ContractFunctionRevertedError,
  encodeErrorResult,
  type Hex,
  parseAbi,
  toHex,
} from 'viem';
import { describe, expect, test } from 'vitest';
import type { AcceptedEnforcer } from '../../src/client/types.js';
import {
  decodeAcceptedCaveat,
  deployedEnvironment,
  hashDelegation,
  ROOT_AUTHORITY,
  redeemDelegationCalldata,
  SIGNABLE_DELEGATION_TYPED_DATA,
  toDelegationStruct,
} from '../../src/payments/chain/delegation-framework.js';
import { revertReason } from '../../src/payments/chain/revert-reason.js';
import { ACCEPTED_ENFORCERS } from '../../src/payments/session/delegation-policy.js';

const environment = getSmartAccountsEnvironment(8453);
const bytes = (minLength: number, maxLength: number) =>
  fc.uint8Array({ minLength, maxLength }).map((array) => toHex(array));
const address = bytes(20, 20).map((hex) => hex as Address);
const delegation: fc.Arbitrary<Delegation> = fc.record({
  delegate: address,
  delegator: address,
  authority: fc.oneof(fc.constant(KIT_ROOT_AUTHORITY), bytes(32, 32)),
  caveats: fc.array(fc.record({ enforcer: address, terms: bytes(0, 140), args: bytes(0, 8) }), {
    maxLength: 6,
  }),
  salt: fc.bigInt({ min: 0n, max: 2n ** 256n - 1n }).map((salt) => toHex(salt)),
  signature: bytes(0, 80),
});

describe('the gateway’s Delegation Framework matches the kit', () => {
  test('root authority, typed data, struct and hash', () => {
    expect(ROOT_AUTHORITY).toBe(KIT_ROOT_AUTHORITY);
    expect(SIGNABLE_DELEGATION_TYPED_DATA).toEqual(KIT_TYPED_DATA);
    fc.assert(
      fc.property(delegation, (value) => {
        expect(toDelegationStruct(value)).toEqual(kitToDelegationStruct(value));
        expect(hashDelegation(value)).toBe(kitHashDelegation(value));
      }),
    );
  });

  test('the settlement calldata (redeemDelegations, one call, single default mode)', () => {
    fc.assert(
      fc.property(delegation, address, bytes(0, 100), (value, target, callData) => {
        expect(redeemDelegationCalldata(value, target, callData)).toBe(
          contracts.DelegationManager.encode.redeemDelegations({
            delegations: [[value]],
            modes: [ExecutionMode.SingleDefault],
            executions: [[createExecution({ target, callData })]],
          }),
        );
      }),
    );
  });

  test('the terms of every accepted enforcer, and the errors of malformed ones', () => {
    const outcome = (decode: () => unknown) => {
      try {
        return { decoded: decode() };
      } catch (error) {
        return { error: (error as Error).message };
      }
    };
    const name = fc.constantFrom(...ACCEPTED_ENFORCERS);
    // Well-formed lengths and any other length, with small numbers so none is "too large".
    const terms = fc.oneof(
      fc.constantFrom(0, 20, 32, 52, 116).chain((length) => bytes(length, length)),
      bytes(0, 150),
      fc
        .tuple(fc.integer({ min: 0, max: 2 ** 40 }), fc.integer({ min: 0, max: 2 ** 40 }), bytes(0, 40))
        .map(
          ([a, b, rest]) =>
            `0x${a.toString(16).padStart(32, '0')}${b.toString(16).padStart(32, '0')}${rest.slice(2)}` as Hex,
        ),
    );
    fc.assert(
      fc.property(name, terms, (enforcer: AcceptedEnforcer, value) => {
        const caveat = {
          enforcer: environment.caveatEnforcers[enforcer] as Address,
          terms: value,
          args: '0x' as Hex,
        };
        expect(outcome(() => decodeAcceptedCaveat(enforcer, caveat))).toEqual(
          outcome(() => decodeCaveat({ caveat, environment })),
        );
      }),
      { numRuns: 500 },
    );
  });

  test('the deployed environment of every chain the kit knows, and the error of one it does not', () => {
    for (const chainId of [1, 10, 137, 8453, 42161, 84532, 11155111]) {
      expect(deployedEnvironment(chainId)).toEqual(getSmartAccountsEnvironment(chainId));
    }
    expect(() => deployedEnvironment(31337)).toThrow(
      (() => {
        try {
          getSmartAccountsEnvironment(31337);
        } catch (error) {
          return (error as Error).message;
        }
      })(),
    );
  });

  test('revert reasons: framework errors, Error(string), Panic, token errors, text, and none', () => {
    const abi = parseAbi([
      'error CannotUseADisabledDelegation()',
      'error ERC20InsufficientBalance(address sender, uint256 balance, uint256 needed)',
      'error Error(string)',
      'error Panic(uint256)',
    ]);
    const reverts: Hex[] = [
      encodeErrorResult({ abi, errorName: 'CannotUseADisabledDelegation' }),
      encodeErrorResult({
        abi,
        errorName: 'Error',
        args: ['ERC20TransferAmountEnforcer:allowance-exceeded'],
      }),
      encodeErrorResult({ abi, errorName: 'Panic', args: [17n] }),
      encodeErrorResult({ abi, errorName: 'Panic', args: [99n] }),
      encodeErrorResult({
        abi,
        errorName: 'ERC20InsufficientBalance',
        args: ['0x00000000000000000000000000000000000000aa', 1n, 2n],
      }),
      toHex('plain text reason'),
      '0xdeadbeef00',
    ];
    const errors: unknown[] = [
      ...reverts.flatMap((data) => [
        new ContractFunctionRevertedError({ abi: [], data, functionName: 'redeemDelegations' }),
        new BaseError('Execution reverted', { cause: new BaseError(`reverted with data: ${data}`) }),
        { message: 'rpc error', data: { data } },
      ]),
      new BaseError('fetch failed'),
      new Error('nothing hex here'),
      'a string',
      undefined,
    ];
    for (const error of errors) expect(revertReason(error)).toBe(decodeRevertReason(error)?.message);
  });
});
