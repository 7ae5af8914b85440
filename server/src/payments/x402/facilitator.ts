import { x402Facilitator } from '@x402/core/facilitator';
import { HTTPFacilitatorClient } from '@x402/core/http';
import {
  type PaymentPayload,
  type PaymentRequirements,
  SettleError,
  type SettleResponse,
  VerifyError,
  type VerifyResponse,
} from '@x402/core/types';
import { toFacilitatorEvmSigner, x402UptoPermit2ProxyAddress } from '@x402/evm';
import { ExactEvmScheme } from '@x402/evm/exact/facilitator';
import { UptoEvmScheme } from '@x402/evm/upto/facilitator';
import {
  type Abi,
  type Address,
  BaseError,
  concat,
  encodeFunctionData,
  type Hash,
  type Hex,
  isAddress,
  isAddressEqual,
  isHash,
} from 'viem';
import { markSettlementSent } from '../../billing/settlements.js';
import type { Store } from '../../store/database.js';
import {
  BroadcastError,
  type ChainClient,
  cappedGasLimit,
  delegatorCode,
  GasCapExceededError,
  isTransportFailure,
  multicall3Deployed,
  NONCE_ATTEMPTS,
} from '../chain/index.js';
import type { AuthorizationBatcher } from './authorization-batch.js';
import { isErc7710Payload, settleErc7710, verifyErc7710 } from './erc7710.js';

// x402's own default wait for a settlement's receipt.
const DEFAULT_CONFIRMATION_TIMEOUT_MS = 60_000;

/**
 * Verifies and settles x402 proofs: in process with the gateway's relayer, or a remote facilitator.
 * Failures the facilitator reports are results (`isValid`/`success` false); a thrown error means
 * the outcome is unknown (the facilitator could not be reached, or did not answer in time).
 */
export interface PaymentFacilitator {
  /**
   * Whether each transaction it sends is announced through `onSubmitted` before its broadcast (in
   * process): then a refusal, or a node failure it throws, with none announced proves that nothing
   * it sent can land. A remote facilitator names its transaction only in its answer, which a
   * failure may leave empty after a broadcast (x402's reference facilitator answers any error
   * thrown while sending that way).
   */
  readonly announcesSends: boolean;
  /**
   * The address that sends the settlements of `upto` permits and ERC-7710 delegations, which a
   * permit or delegation must name; none when the facilitator does not settle those.
   */
  readonly settler?: Address;
  verify(payload: PaymentPayload, requirements: PaymentRequirements): Promise<VerifyResponse>;
  /**
   * Settles on chain and waits for the receipt. `onSubmitted` learns the transaction's hash as soon
   * as it is known: with the signed transaction before broadcast in process (again when its nonce
   * was refused and it is signed anew), with the result for a remote facilitator. `settlementId`:
   * the settlement it pays, which may then share a transaction with other payers' (in process),
   * all of them marked sent on it in one database transaction instead of through `onSubmitted`.
   */
  settle(
    payload: PaymentPayload,
    requirements: PaymentRequirements,
    onSubmitted: SubmittedListener,
    settlementId?: string,
  ): Promise<SettleResponse>;
}

export type SubmittedListener = (txHash: Hash, raw?: Hex) => Promise<void>;

/** A proof as the facilitator takes it. */
export interface FacilitatorInput {
  payload: PaymentPayload;
  requirements: PaymentRequirements;
}

/** What a rail calls the facilitator with; a call that gets no answer is logged here. */
export interface FacilitatorCaller {
  store: Store;
  facilitator: PaymentFacilitator;
  log?: { error(details: object, message: string): void };
}

/**
 * The facilitator's verdict on `payer`'s proof. No answer is logged (as `what`) and thrown as the
 * 503 `unavailable` makes: the payer may retry.
 */
export async function verifyProof(
  { facilitator, log }: FacilitatorCaller,
  what: string,
  payer: Address,
  { payload, requirements }: FacilitatorInput,
  unavailable: (message: string) => Error,
): Promise<VerifyResponse> {
  try {
    return await facilitator.verify(payload, requirements);
  } catch (error) {
    log?.error({ err: error, payer }, `${what} failed without an answer`);
    throw unavailable('the payment facilitator cannot be reached; retry shortly');
  }
}

/**
 * Settles `payer`'s proof for the opened settlement of id `settlement`, each transaction marked sent
 * on it as soon as it is known. No answer is logged (as `what`) and thrown again: only the chain can
 * say what became of it.
 */
export async function settleProof(
  { store, facilitator, log }: FacilitatorCaller,
  what: string,
  payer: Address,
  settlement: string,
  { payload, requirements }: FacilitatorInput,
): Promise<SettleResponse> {
  try {
    return await facilitator.settle(
      payload,
      requirements,
      async (txHash, raw) => {
        await markSettlementSent(store, settlement, txHash, raw);
      },
      settlement,
    );
  } catch (error) {
    log?.error({ err: error, payer, settlement }, `${what} failed without an answer`);
    throw error;
  }
}

export interface InProcessFacilitatorOptions {
  /** How long a settlement waits for its receipt before it is reported pending. */
  confirmationTimeoutMs?: number;
  /**
   * Sends the EIP-3009 settlements of different payers that fall due together in one transaction
   * (none: each alone). Used only where Multicall3 is deployed.
   */
  batcher?: AuthorizationBatcher;
}

/**
 * x402's facilitator (`x402Facilitator` with the `exact` and `upto` EVM schemes) running in the
 * gateway, sending through the gateway's relayer: the session rail sends from the same key, and only
 * the relayer knows which nonce comes next.
 */
export function inProcessFacilitator(
  chain: ChainClient,
  options: InProcessFacilitatorOptions = {},
): PaymentFacilitator {
  const batching = options.batcher && { batcher: options.batcher, ready: multicall3Deployed(chain) };
  const facilitatorFor = (calls: SignerCalls) => {
    const signer = relayerSigner(chain, calls, { ...options, batching });
    return new x402Facilitator()
      .register(chain.network, new ExactEvmScheme(signer))
      .register(chain.network, new UptoEvmScheme(signer));
  };
  return {
    announcesSends: true,
    settler: chain.relayer.address,
    async verify(payload, requirements) {
      if (isErc7710Payload(payload.payload)) return verifyErc7710(chain, payload.payload, requirements);
      const unsupported = await unsupportedPayer(chain, payload);
      if (unsupported) return unsupported;
      // One facilitator per verification, so its signer reports this verification's node failures.
      const nodeFailures: unknown[] = [];
      let result: VerifyResponse;
      try {
        result = await facilitatorFor({ onNodeFailure: (error) => nodeFailures.push(error) }).verify(
          payload,
          requirements,
        );
      } catch (error) {
        // viem could not decode the proof (e.g. a signature ending in ERC-6492's magic suffix that
        // wraps nothing): an answer about the proof, unlike a chain that could not be asked.
        if (error instanceof BaseError && !isTransportFailure(error))
          return { isValid: false, invalidReason: 'invalid_payload', invalidMessage: error.shortMessage };
        throw error;
      }
      // x402 takes a code or signature check the node did not answer for a signature that does not
      // check out: the proof was not judged, and the payer must not be told it is invalid.
      if (!result.isValid && nodeFailures.length > 0) throw nodeFailures[0];
      return result;
    },
    async settle(payload, requirements, onSubmitted, settlementId) {
      if (isErc7710Payload(payload.payload))
        return settleErc7710(
          chain,
          payload.payload,
          requirements,
          onSubmitted,
          options.confirmationTimeoutMs ?? DEFAULT_CONFIRMATION_TIMEOUT_MS,
        );
      // One facilitator per settlement, so its signer reports this settlement's transaction and the
      // node failures met settling it.
      const nodeFailures: unknown[] = [];
      const result = await facilitatorFor({
        onSubmitted,
        settlementId,
        onNodeFailure: (error) => nodeFailures.push(error),
      }).settle(payload, requirements);
      // x402 takes a node that did not answer before a transaction was named (a check, a gas
      // estimate) for a refusal: the proof was not judged, and the payer must not be told it was refused.
      if (!result.success && !result.transaction && nodeFailures.length > 0) throw nodeFailures[0];
      return result;
    },
  };
}

/**
 * A refusal of a payer whose address holds code other than a MetaMask smart account of the
 * Delegation Framework: its ERC-1271 check runs in every settlement the relayer pays for, and only
 * the framework's DeleGators are known to check signatures at a usual cost. EOAs (and accounts not
 * deployed, which x402 refuses itself) pass.
 */
async function unsupportedPayer(
  chain: ChainClient,
  payload: PaymentPayload,
): Promise<VerifyResponse | undefined> {
  const signed = payload.payload as {
    authorization?: { from?: unknown };
    permit2Authorization?: { from?: unknown };
  };
  const payer = (signed.authorization ?? signed.permit2Authorization)?.from;
  if (typeof payer !== 'string' || !isAddress(payer)) return undefined;
  if ((await delegatorCode(chain.publicClient, payer, chain.environment)) !== 'other') return undefined;
  return {
    isValid: false,
    invalidReason: 'unsupported_payer',
    invalidMessage: `${payer} is a contract but not a MetaMask smart account of the Delegation Framework (a HybridDeleGator or MultiSigDeleGator proxy, or an EIP-7702 stateless DeleGator); this gateway settles proofs of EOAs and of those accounts only`,
    payer,
  };
}

/** A remote x402 facilitator (`FACILITATOR_URL`): POST /verify, POST /settle. */
export function remoteFacilitator(url: string, timeoutMs = 90_000): PaymentFacilitator {
  const client = new HTTPFacilitatorClient({ url, timeoutMs });
  return {
    announcesSends: false,
    async verify(payload, requirements) {
      try {
        return await client.verify(payload, requirements);
      } catch (error) {
        if (error instanceof VerifyError)
          return { isValid: false, invalidReason: error.invalidReason, invalidMessage: error.invalidMessage };
        throw error;
      }
    },
    async settle(payload, requirements, onSubmitted) {
      let result: SettleResponse;
      try {
        result = await client.settle(payload, requirements);
      } catch (error) {
        if (!(error instanceof SettleError)) throw error;
        result = {
          success: false,
          errorReason: error.errorReason,
          errorMessage: error.errorMessage,
          payer: error.payer,
          transaction: error.transaction,
          network: error.network,
        };
      }
      // Only a transaction hash can be looked up on chain; anything else names no transaction.
      if (isHash(result.transaction)) await onSubmitted(result.transaction);
      return result;
    },
  };
}

/** What the facilitator's signer reports of its calls. */
interface SignerCalls {
  /** Settling: each transaction signed, before its broadcast. Without it the signer sends nothing. */
  onSubmitted?: SubmittedListener;
  /** The settlement its transaction pays: given, it may share one with other payers' settlements. */
  settlementId?: string;
  /** A call the node did not answer (unreachable, overloaded, out of time), before it is thrown. */
  onNodeFailure?: (error: unknown) => void;
}

// Any code: x402 only asks whether the asset has some (see relayerSigner).
const ASSET_CODE: Hex = '0xfe';

function relayerSigner(chain: ChainClient, calls: SignerCalls, sending: SignerSending) {
  const client = chain.publicClient;
  const { onSubmitted, settlementId, onNodeFailure } = calls;
  const ask = <T>(call: Promise<T>): Promise<T> =>
    call.catch((error: unknown) => {
      if (isTransportFailure(error)) onNodeFailure?.(error);
      throw error;
    });
  const send = async (to: Address, data: Hex): Promise<Hash> => {
    if (!onSubmitted) throw new Error('this facilitator only verifies');
    // x402's upto proxy runs Permit2 (and maybe the payer's EIP-2612 permit) around the transfer.
    const kind = isAddressEqual(to, x402UptoPermit2ProxyAddress) ? 'x402UptoSettlement' : 'x402Settlement';
    // The estimate simulates the transfer from the relayer: one that would revert is not sent.
    const simulate = async () => {
      const estimate = await ask(client.estimateGas({ account: chain.relayer.address, to, data }));
      try {
        return cappedGasLimit(kind, estimate);
      } catch (error) {
        if (!(error instanceof GasCapExceededError)) throw error;
        throw new Error(
          `the payer's transfer needs ${estimate} gas; the gateway spends at most ${error.cap} on an x402 settlement`,
        );
      }
    };
    const gas = await simulate();
    // Only EIP-3009 authorizations go with others: the upto proxy and the DelegationManager let only
    // the relayer itself settle, not Multicall3.
    const { batching } = sending;
    const batcher =
      batching && settlementId && isAddressEqual(to, chain.usdc) && (await batching.ready())
        ? batching.batcher
        : undefined;
    const submit = async () =>
      batcher && settlementId
        ? (await batcher.send({ call: { to, data }, gas, simulate, settlementId })).tx
        : chain.relayer.submit({ to, data, gas }, (tx) => onSubmitted(tx.hash, tx.raw));
    for (let attempt = 1; ; attempt++) {
      try {
        return (await ask(submit())).hash;
      } catch (error) {
        // Its nonce was taken: never mined, so the same authorization is signed under the next one.
        if (!(error instanceof BroadcastError && error.kind === 'nonce' && attempt < NONCE_ATTEMPTS))
          throw error;
      }
    }
  };
  return toFacilitatorEvmSigner(
    {
      address: chain.relayer.address,
      // From the relayer: x402's upto proxy lets only the facilitator a permit names settle it, also in a simulation.
      readContract: (args) =>
        ask(
          client.readContract({
            ...(args as Parameters<typeof client.readContract>[0]),
            account: chain.relayer.address,
          }),
        ),
      verifyTypedData: (args) =>
        ask(client.verifyTypedData(args as Parameters<typeof client.verifyTypedData>[0])),
      // x402 asks whether the asset is a contract at the start of a verification and waits for the
      // answer only after its other checks, not at all when one fails: a node failure meanwhile
      // would be a rejection no one handles, which ends the process. The asset is always the
      // gateway's USDC, whose name and version the proof's terms were read from: a contract. (Every
      // other call of the signer x402 awaits as it makes it.)
      getCode: (args) =>
        isAddressEqual(args.address, chain.usdc) ? Promise.resolve(ASSET_CODE) : ask(client.getCode(args)),
      waitForTransactionReceipt: (args) => chain.relayer.waitForReceipt(args),
      writeContract: (args) =>
        send(
          args.address,
          concat([
            encodeFunctionData({ abi: args.abi as Abi, functionName: args.functionName, args: args.args }),
            args.dataSuffix ?? '0x',
          ]),
        ),
      sendTransaction: (args) => send(args.to, args.data),
    },
    sending.confirmationTimeoutMs === undefined
      ? {}
      : { confirmationTimeoutMs: sending.confirmationTimeoutMs },
  );
}

/** How the facilitator's signer sends: the wait for a receipt, and the batcher when Multicall3 is there. */
interface SignerSending {
  confirmationTimeoutMs?: number;
  batching?: { batcher: AuthorizationBatcher; ready: () => Promise<boolean> };
}
