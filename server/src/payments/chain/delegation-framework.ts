/**
 * What the gateway needs of the Delegation Framework, on viem and the framework's own ABIs and
 * deployments, without loading @metamask/smart-accounts-kit at run time: its entry points pull in
 * the whole kit (account abstraction, bytecode, ox, @metamask/utils), about 9 MB more live heap and
 * 10-20 MB more resident memory, for a handful of functions. Each piece below does what the kit
 * 2.0.0 function it names does (same encoding, hash and error messages); test/session compares
 * them with the kit, and the chain suites run them against the deployed contracts.
 */

import { DelegationManager, NonceEnforcer } from '@metamask/delegation-abis';
import { DELEGATOR_CONTRACTS } from '@metamask/delegation-deployments';
import type { Caveat, Delegation, SmartAccountsEnvironment } from '@metamask/smart-accounts-kit';
import {
  type Address,
  concat,
  encodeAbiParameters,
  encodeFunctionData,
  encodePacked,
  getAddress,
  type Hex,
  isAddressEqual,
  keccak256,
  type Log,
  type PublicClient,
  parseEventLogs,
} from 'viem';
import type { AcceptedEnforcer } from '../../client/types.js';

/** The kit's ROOT_AUTHORITY: a delegation straight from the account, not a redelegation. */
export const ROOT_AUTHORITY = '0xffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff';

/** The kit's SIGNABLE_DELEGATION_TYPED_DATA: the EIP-712 types a delegation is signed with. */
export const SIGNABLE_DELEGATION_TYPED_DATA = {
  Caveat: [
    { name: 'enforcer', type: 'address' },
    { name: 'terms', type: 'bytes' },
  ],
  Delegation: [
    { name: 'delegate', type: 'address' },
    { name: 'delegator', type: 'address' },
    { name: 'authority', type: 'bytes32' },
    { name: 'caveats', type: 'Caveat[]' },
    { name: 'salt', type: 'uint256' },
  ],
} as const;

/** The kit's toDelegationStruct: checksummed addresses and the salt as a number. */
export function toDelegationStruct(delegation: Delegation) {
  return {
    delegate: getAddress(delegation.delegate),
    delegator: getAddress(delegation.delegator),
    authority: delegation.authority ?? ROOT_AUTHORITY,
    caveats: delegation.caveats.map((caveat) => ({
      enforcer: getAddress(caveat.enforcer),
      terms: caveat.terms,
      args: caveat.args,
    })),
    salt: delegation.salt === '0x' ? 0n : BigInt(delegation.salt),
    signature: delegation.signature,
  };
}

const DELEGATION_TYPEHASH = '0x88c1d2ecf185adf710588203a5f263f0ff61be0d33da39792cde19ba9aa4331e';
const CAVEAT_TYPEHASH = '0x80ad7e1b04ee6d994a125f4714ca0720908bd80ed16063ec8aee4b88e9253e2d';

/** The kit's hashDelegation: the EIP-712 struct hash the DelegationManager keys a delegation by. */
export function hashDelegation(delegation: Delegation): Hex {
  const struct = toDelegationStruct(delegation);
  const caveatHashes = struct.caveats.map((caveat) =>
    keccak256(
      encodeAbiParameters(
        [{ type: 'bytes32' }, { type: 'address' }, { type: 'bytes32' }],
        [CAVEAT_TYPEHASH, caveat.enforcer, keccak256(caveat.terms)],
      ),
    ),
  );
  return keccak256(
    encodeAbiParameters(
      [
        { type: 'bytes32' },
        { type: 'address' },
        { type: 'address' },
        { type: 'bytes32' },
        { type: 'bytes32' },
        { type: 'uint256' },
      ],
      [
        DELEGATION_TYPEHASH,
        struct.delegate,
        struct.delegator,
        struct.authority,
        keccak256(concat(caveatHashes)),
        struct.salt,
      ],
    ),
  );
}

/** ABI type of a delegation chain, as a `permissionContext` encodes it. */
export const DELEGATIONS_ABI_TYPE = [
  {
    type: 'tuple[]',
    components: [
      { type: 'address', name: 'delegate' },
      { type: 'address', name: 'delegator' },
      { type: 'bytes32', name: 'authority' },
      {
        type: 'tuple[]',
        name: 'caveats',
        components: [
          { type: 'address', name: 'enforcer' },
          { type: 'bytes', name: 'terms' },
          { type: 'bytes', name: 'args' },
        ],
      },
      { type: 'uint256', name: 'salt' },
      { type: 'bytes', name: 'signature' },
    ],
  },
] as const;

/** The kit's ExecutionMode.SingleDefault: one call, reverting when it reverts. */
export const SINGLE_DEFAULT_MODE = `0x${'0'.repeat(64)}` as const;

/**
 * The kit's `contracts.DelegationManager.encode.redeemDelegations` for one delegation and one call
 * without native value, in the single default mode (the call packed as target, value, calldata).
 */
export function redeemDelegationCalldata(delegation: Delegation, target: Address, callData: Hex): Hex {
  return redeemDelegationsCalldata([{ delegation, target, callData }]);
}

/** One delegation redeemed for one call without native value. */
export interface Redemption {
  delegation: Delegation;
  target: Address;
  callData: Hex;
}

/**
 * `redeemDelegations` of several delegations at once (each its own chain of one, one mode, one
 * call), as the kit encodes it with `delegations: [[dA], [dB]]`: all succeed or the call reverts.
 */
export function redeemDelegationsCalldata(redemptions: readonly Redemption[]): Hex {
  return encodeFunctionData({
    abi: DelegationManager,
    functionName: 'redeemDelegations',
    args: [
      redemptions.map(({ delegation }) =>
        encodeAbiParameters(DELEGATIONS_ABI_TYPE, [[toDelegationStruct(delegation)]]),
      ),
      redemptions.map(() => SINGLE_DEFAULT_MODE),
      redemptions.map(({ target, callData }) =>
        encodePacked(['address', 'uint256', 'bytes'], [target, 0n, callData]),
      ),
    ],
  });
}

/**
 * How many delegations a mined transaction redeemed through the DelegationManager (its
 * `RedeemedDelegation` events), and the position of `delegator`'s first among them (-1: none).
 */
export function redemptionsIn(
  logs: readonly Log[],
  delegationManager: Address,
  delegator: Address,
): { count: number; position: number } {
  const redeemed = parseEventLogs({
    abi: DelegationManager,
    eventName: 'RedeemedDelegation',
    logs: [...logs],
  }).filter((log) => isAddressEqual(log.address, delegationManager));
  return {
    count: redeemed.length,
    position: redeemed.findIndex((log) => isAddressEqual(log.args.rootDelegator, delegator)),
  };
}

/** The kit's `contracts.DelegationManager.read.disabledDelegations`: whether the delegator disabled it. */
export function isDelegationDisabled(
  client: PublicClient,
  delegationManager: Address,
  delegationHash: Hex,
): Promise<boolean> {
  return client.readContract({
    address: delegationManager,
    abi: DelegationManager,
    functionName: 'disabledDelegations',
    args: [delegationHash],
  });
}

/** NonceEnforcer's nonce for the delegator: a delegation naming another one was revoked (`incrementNonce`). */
export function currentDelegatorNonce(
  client: PublicClient,
  nonceEnforcer: Address,
  delegationManager: Address,
  delegator: Address,
): Promise<bigint> {
  return client.readContract({
    address: nonceEnforcer,
    abi: NonceEnforcer,
    functionName: 'currentNonce',
    args: [delegationManager, delegator],
  });
}

/** The kit's decodeCaveat results, for the enforcers the gateway accepts. */
export type AcceptedCaveatTerms =
  | { type: 'erc20TransferAmount'; tokenAddress: Hex; maxAmount: bigint }
  | {
      type: 'erc20PeriodTransfer';
      tokenAddress: Hex;
      periodAmount: bigint;
      periodDuration: number;
      startDate: number;
    }
  | { type: 'allowedCalldata'; startIndex: number; value: Hex }
  | { type: 'timestamp'; afterThreshold: number; beforeThreshold: number }
  | { type: 'redeemer'; redeemers: Hex[] }
  | { type: 'valueLte'; maxValue: bigint }
  | { type: 'nonce'; nonce: Hex };

/** The terms of a caveat of an accepted enforcer, decoded as the kit's decodeCaveat (delegation-core 3) does. */
export function decodeAcceptedCaveat(
  enforcer: AcceptedEnforcer,
  { terms }: Pick<Caveat, 'terms'>,
): AcceptedCaveatTerms {
  switch (enforcer) {
    case 'ERC20TransferAmountEnforcer':
      exactLength(terms, 52, 'Invalid ERC20TransferAmount terms: must be exactly 52 bytes');
      return {
        type: 'erc20TransferAmount',
        tokenAddress: hexAt(terms, 0, 20),
        maxAmount: bigintAt(terms, 20, 32),
      };
    case 'ERC20PeriodTransferEnforcer':
      exactLength(terms, 116, 'Invalid ERC20TokenPeriodTransfer terms: must be exactly 116 bytes');
      return {
        type: 'erc20PeriodTransfer',
        tokenAddress: hexAt(terms, 0, 20),
        periodAmount: bigintAt(terms, 20, 32),
        periodDuration: numberAt(terms, 52, 32),
        startDate: numberAt(terms, 84, 32),
      };
    case 'AllowedCalldataEnforcer':
      if (byteLength(terms) < 32) throw new Error('Invalid AllowedCalldata terms: must be at least 32 bytes');
      return { type: 'allowedCalldata', startIndex: numberAt(terms, 0, 32), value: `0x${terms.slice(66)}` };
    case 'TimestampEnforcer':
      exactLength(terms, 32, 'Invalid Timestamp terms: must be exactly 32 bytes');
      return {
        type: 'timestamp',
        afterThreshold: numberAt(terms, 0, 16),
        beforeThreshold: numberAt(terms, 16, 16),
      };
    case 'RedeemerEnforcer': {
      const length = byteLength(terms);
      if (length === 0 || length % 20 !== 0) throw new Error('Invalid redeemers: must be a multiple of 20');
      return {
        type: 'redeemer',
        redeemers: Array.from({ length: length / 20 }, (_, index) => hexAt(terms, index * 20, 20)),
      };
    }
    case 'ValueLteEnforcer':
      exactLength(terms, 32, 'Invalid ValueLte terms: must be exactly 32 bytes');
      return { type: 'valueLte', maxValue: bigintAt(terms, 0, 32) };
    case 'NonceEnforcer':
      exactLength(terms, 32, 'Invalid Nonce terms: must be exactly 32 bytes');
      return { type: 'nonce', nonce: terms };
  }
}

const byteLength = (hex: Hex) => (hex.length - 2) / 2;

function exactLength(hex: Hex, bytes: number, message: string): void {
  if (byteLength(hex) !== bytes) throw new Error(message);
}

const hexAt = (hex: Hex, offset: number, size: number): Hex =>
  `0x${hex.slice(2 + offset * 2, 2 + (offset + size) * 2)}`;

const bigintAt = (hex: Hex, offset: number, size: number) => BigInt(hexAt(hex, offset, size));

function numberAt(hex: Hex, offset: number, size: number): number {
  const value = bigintAt(hex, offset, size);
  if (value > Number.MAX_SAFE_INTEGER) throw new Error('Number is too large');
  return Number(value);
}

/** The kit's getSmartAccountsEnvironment: the framework's deployment (version 1.3.0) on a chain. */
export function deployedEnvironment(chainId: number): SmartAccountsEnvironment {
  const deployment = (DELEGATOR_CONTRACTS as Record<string, Record<number, Record<string, Address>>>)[
    '1.3.0'
  ]?.[chainId];
  if (!deployment) throw new Error(`No contracts found for version 1.3.0 chain ${chainId}`);
  return {
    DelegationManager: deployment.DelegationManager,
    EntryPoint: deployment.EntryPoint,
    SimpleFactory: deployment.SimpleFactory,
    implementations: {
      MultiSigDeleGatorImpl: deployment.MultiSigDeleGatorImpl,
      HybridDeleGatorImpl: deployment.HybridDeleGatorImpl,
      EIP7702StatelessDeleGatorImpl: deployment.EIP7702StatelessDeleGatorImpl,
    },
    caveatEnforcers: Object.fromEntries(ENFORCER_NAMES.map((name) => [name, deployment[name]])),
  } as SmartAccountsEnvironment;
}

/** The caveat enforcers of the kit's environment, in its order. */
const ENFORCER_NAMES = [
  'AllowedCalldataEnforcer',
  'AllowedMethodsEnforcer',
  'AllowedTargetsEnforcer',
  'ApprovalRevocationEnforcer',
  'ArgsEqualityCheckEnforcer',
  'BlockNumberEnforcer',
  'DeployedEnforcer',
  'ERC20BalanceChangeEnforcer',
  'ERC20TransferAmountEnforcer',
  'ERC20StreamingEnforcer',
  'ERC721BalanceChangeEnforcer',
  'ERC721TransferEnforcer',
  'ERC1155BalanceChangeEnforcer',
  'IdEnforcer',
  'LimitedCallsEnforcer',
  'NonceEnforcer',
  'TimestampEnforcer',
  'ValueLteEnforcer',
  'NativeTokenTransferAmountEnforcer',
  'NativeBalanceChangeEnforcer',
  'NativeTokenStreamingEnforcer',
  'NativeTokenPaymentEnforcer',
  'OwnershipTransferEnforcer',
  'RedeemerEnforcer',
  'SpecificActionERC20TransferBatchEnforcer',
  'ERC20PeriodTransferEnforcer',
  'NativeTokenPeriodTransferEnforcer',
  'ExactCalldataBatchEnforcer',
  'ExactCalldataEnforcer',
  'ExactExecutionEnforcer',
  'ExactExecutionBatchEnforcer',
  'MultiTokenPeriodEnforcer',
] as const;
