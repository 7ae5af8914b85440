/**
 * The message of the kit's decodeRevertReason (@metamask/smart-accounts-kit 2.0.0, utils), without
 * loading the kit (see delegation-framework.ts): the revert data of a viem error, or any hex in its
 * causes, decoded with the Delegation Framework's ABIs, else as Solidity's Error/Panic, else as text.
 */
import * as delegationAbis from '@metamask/delegation-abis';
import { type Abi, BaseError, ContractFunctionRevertedError, decodeErrorResult, type Hex, isHex } from 'viem';
import { formatAbiItemWithArgs } from 'viem/utils';

// An empty ABI first: viem decodes Solidity's Error(string) and Panic(uint256) with any ABI.
const REVERT_ABIS: readonly Abi[] = [
  [],
  ...(Object.values(delegationAbis) as Abi[]).filter((abi) => Array.isArray(abi) && abi.length > 0),
];
const MAX_ERROR_TRAVERSAL_DEPTH = 8;
const PANIC_REASONS: Record<string, string> = {
  '1': 'An `assert` condition failed.',
  '17': 'Arithmetic operation resulted in underflow or overflow.',
  '18': 'Division or modulo by zero.',
  '33': 'Attempted to convert to an invalid type.',
  '34': 'Attempted to access a storage byte array that is incorrectly encoded.',
  '49': 'Performed `.pop()` on an empty array.',
  '50': 'Array index is out of bounds.',
  '65': 'Allocated too much memory or created an array which is too large.',
  '81': 'Attempted to call a zero-initialized variable of internal function type.',
};

/** What the chain said, as the kit words it; undefined when no revert data can be decoded. */
export function revertReason(error: unknown): string | undefined {
  const viemRevert = viemContractRevert(error);
  if (viemRevert !== undefined) return viemRevert;
  for (const candidate of revertDataCandidates(error)) {
    const decoded = decodeRevertData(candidate);
    if (decoded !== undefined) return decoded;
  }
  return undefined;
}

function viemContractRevert(error: unknown): string | undefined {
  if (!(error instanceof BaseError)) return undefined;
  const revert = error.walk((cause) => cause instanceof ContractFunctionRevertedError);
  if (!(revert instanceof ContractFunctionRevertedError) || !revert.raw) return undefined;
  if (revert.data) return formatDecodedError(revert.data.errorName, revert.data.args, revert.data.abiItem);
  return decodeRevertData(revert.raw);
}

function decodeRevertData(data: Hex): string | undefined {
  for (const abi of REVERT_ABIS) {
    try {
      const { abiItem, args, errorName } = decodeErrorResult({ abi, data });
      return formatDecodedError(errorName, args, abiItem);
    } catch {
      // not an error of this ABI
    }
  }
  return decodeRawString(data);
}

function formatDecodedError(
  errorName: string,
  args: readonly unknown[] | undefined,
  abiItem: Parameters<typeof formatAbiItemWithArgs>[0]['abiItem'],
): string {
  const [first] = args ?? [];
  if (errorName === 'Error') return typeof first === 'string' ? first : errorName;
  if (errorName === 'Panic') {
    const code = String(first);
    return PANIC_REASONS[code] ?? `Panic(${code})`;
  }
  const formatted = formatAbiItemWithArgs({
    abiItem,
    args: args ?? [],
    includeFunctionName: false,
    includeName: false,
  });
  return `${errorName}${formatted ?? ''}`;
}

/** Printable ASCII only, else nothing. */
function decodeRawString(data: Hex): string | undefined {
  const bytes = data.slice(2);
  if (bytes.length === 0 || bytes.length % 2 !== 0) return undefined;
  let value = '';
  for (let index = 0; index < bytes.length; index += 2) {
    const code = Number.parseInt(bytes.slice(index, index + 2), 16);
    if (Number.isNaN(code) || code < 32 || code > 126) return undefined;
    value += String.fromCharCode(code);
  }
  return value;
}

/** Hex strings in the error and its causes (labelled ones first, per field), at most 8 levels deep. */
function revertDataCandidates(error: unknown): Hex[] {
  const candidates: Hex[] = [];
  const seen = new Set<unknown>();
  const add = (candidate: string) => {
    if (candidate.length < 10 || candidate.length % 2 !== 0 || !isHex(candidate)) return;
    if (!candidates.includes(candidate)) candidates.push(candidate);
  };
  const addFrom = (value: unknown) => {
    if (typeof value !== 'string') return;
    for (const [, candidate] of value.matchAll(/\b(?:reason|revertData|raw|data):\s*(0x[0-9a-fA-F]+)/giu))
      if (candidate) add(candidate);
    for (const [candidate] of value.matchAll(/0x[0-9a-fA-F]+/gu)) add(candidate);
  };
  const visit = (value: unknown, depth = 0) => {
    if (value === null || value === undefined || seen.has(value) || depth > MAX_ERROR_TRAVERSAL_DEPTH) return;
    addFrom(value);
    if (Array.isArray(value)) {
      seen.add(value);
      for (const item of value) visit(item, depth + 1);
      return;
    }
    if (typeof value !== 'object') return;
    seen.add(value);
    const record = value as Record<string, unknown>;
    for (const field of ['revertData', 'raw', 'data', 'details', 'reason', 'shortMessage', 'message'])
      addFrom(record[field]);
    for (const field of ['data', 'details', 'error', 'metaMessages', 'originalError', 'cause'])
      visit(record[field], depth + 1);
  };
  visit(error);
  return candidates;
}
