import type { SettleResponse, VerifyResponse } from '@x402/core/types';
import { type Address, BaseError, isHash } from 'viem';
import { debtOf, owedAtomicIfKnown } from '../../billing/ledger.js';
import { formatUsd } from '../../billing/money.js';
import {
  failSettlement,
  findSettlement,
  markSettlementRefused,
  openSettlement,
  type Settlement,
  SettlementInProgressError,
  settlementsOf,
} from '../../billing/settlements.js';
import { GatewayError } from '../../errors.js';
import type { SettlementMetrics, SettlementOutcome } from '../../observability/index.js';
import { servedPath } from '../../served-path.js';
import type { AdmissionRequest } from '../../services/chat-contracts.js';
import type { Store } from '../../store/database.js';
import type { DebtSettled, IdentifiedPayer, PaymentMethod } from '../admission/index.js';
import { type ChainClient, isTransportFailure, shownReason } from '../chain/index.js';
import { awaitReceipt, type OutboxDeps } from '../outbox/index.js';
import { isAuthorizationSeen, recordAuthorization } from './authorizations.js';
import { type PaymentFacilitator, settleProof, verifyProof } from './facilitator.js';
import { type PaymentIdClaim, type PaymentIdUse, requestPaymentId } from './payment-ids.js';
import {
  carriesProof,
  facilitatorInput,
  isUptoProof,
  type PaymentProof,
  proofMismatch,
  readProof,
  sameAddress,
} from './proof.js';
import {
  authorizationShare,
  finishUnfinishedX402Settlements,
  type ReconcileOutcome,
  reconcileX402Settlement,
} from './reconcile.js';
import { readSignIn, requestOrigin } from './sign-in.js';
import { type PaymentDemand, paymentRequiredError, settlementHeaders, type X402Terms } from './terms.js';
import { uptoPayments } from './upto-payer.js';

/** The response header stating, in USDC atomic units, what the payer's next proof must carry. */
export const OWED_HEADER = 'x-payment-owed';

export interface X402RailOptions {
  store: Store;
  chain: ChainClient;
  facilitator: PaymentFacilitator;
  /** Longest wait for a receipt while a settlement left unfinished is finished (SETTLEMENT_TIMEOUT_MS). */
  receiptTimeoutMs: number;
  /** How long a signed proof stays valid (default 120 s). */
  maxTimeoutSeconds?: number;
  /** Where a facilitator that fails without an answer is reported (the client gets a 503). */
  log?: { error(details: object, message: string): void; warn?(details: object, message: string): void };
  /** Where each settlement's outcome and time are counted (/metrics). */
  metrics?: SettlementMetrics;
  /** COMMISSION_BPS: part of a request's worst case, which an `upto` permit's maximum must cover. */
  commissionBps: number;
  /**
   * How long an `upto` permit must stay valid: the longest a request runs (UPSTREAM_COMPLETION_TIMEOUT_MS)
   * and the wait for its settlement. `upto` is offered when the facilitator settles it in process.
   */
  uptoValiditySeconds: number;
}

/** The x402 rail: its payment method for the gate, and the 402 answers that tell a caller what to pay. */
export interface X402Rail {
  method: PaymentMethod;
  /**
   * The gate's answer to a request with no credential: 402 asking what a wallet that signed in
   * (SIGN-IN-WITH-X) owes, else a zero-value proof that names the payer, with a sign-in challenge.
   */
  paymentRequired(
    request: Pick<AdmissionRequest, 'url' | 'headers' | 'model' | 'request'>,
  ): Promise<GatewayError>;
  /** A 402 for a known payer (e.g. one the session rail could not settle): pay `amountAtomic` by proof. */
  demandPayment(demand: { url: string; reason: string; amountAtomic: bigint }): Promise<GatewayError>;
  /** Start-up: finishes the x402 settlements a previous run left unfinished; returns those still pending. */
  recover(): Promise<Settlement[]>;
  /** Shutdown, once no request runs: waits for the `upto` settlements of completed requests. */
  settled(): Promise<void>;
}

const DEFAULT_MAX_TIMEOUT_SECONDS = 120;
const RETRY_AFTER_SECONDS = '3';

export function createX402Rail(options: X402RailOptions): X402Rail {
  const { store, chain, facilitator } = options;
  const maxTimeoutSeconds = options.maxTimeoutSeconds ?? DEFAULT_MAX_TIMEOUT_SECONDS;
  const outbox: OutboxDeps = { store, chain, receiptTimeoutMs: options.receiptTimeoutMs };
  /** What the chain says of a settlement; a node that cannot be reached leaves it pending (503, retry). */
  const orPending = (outcome: Promise<ReconcileOutcome>) =>
    outcome.catch((error: unknown): ReconcileOutcome => {
      if (error instanceof BaseError) return 'pending';
      throw error;
    });
  const reconcile = (settlement: Settlement) => orPending(reconcileX402Settlement(outbox, settlement));

  const termsOf = async (): Promise<X402Terms> => {
    let token: Awaited<ReturnType<ChainClient['token']>>;
    try {
      token = await chain.token();
    } catch {
      throw paymentsUnavailable('the payment token cannot be read from the chain; retry shortly');
    }
    return {
      network: chain.network,
      chainId: chain.chainId,
      asset: chain.usdc,
      payTo: chain.treasury,
      domain: { name: token.name, version: token.version },
      maxTimeoutSeconds,
      ...(facilitator.settler && {
        upto: { facilitator: facilitator.settler, maxTimeoutSeconds: options.uptoValiditySeconds },
        delegationRedeemer: facilitator.settler,
      }),
    };
  };

  const demand = async (payment: PaymentDemand) => paymentRequiredError(await termsOf(), payment);

  /**
   * Settles what the payer owes with the proof, under the payer's lock. `fromBlock`: where the
   * search for its authorization on chain starts (null for a zero-value proof, which pays nothing).
   */
  const settleDebt = async (
    proof: PaymentProof,
    terms: X402Terms,
    url: string,
    signInOrigin: URL | undefined,
    fromBlock: bigint | null,
    attempt: SettlementAttempt,
  ): Promise<Record<string, string>> => {
    const { authorization } = proof;
    const payer = authorization.from;
    const refuse = (reason: string, amountAtomic: bigint, failedSettlement?: SettleResponse) =>
      paymentRequiredError(terms, {
        reason,
        amountAtomic,
        url,
        version: proof.version,
        failedSettlement,
        signInOrigin,
      });

    await finishUnfinishedSettlement(payer);
    const owed = (await debtOf(store, payer)).owedAtomic;
    const replay = () => refuse(replayReason(proof), owed);
    const key = { asset: proof.nonceKeeper ?? terms.asset, payer, nonce: authorization.nonce };
    if (authorization.value !== owed) {
      // Used meanwhile (by another instance, say), whose request then left this debt: a replay.
      if (await isAuthorizationSeen(store, key)) throw replay();
      throw refuse(amountReason(authorization.value, owed), owed);
    }
    const seen = { ...key, valueAtomic: authorization.value, validBefore: authorization.validBefore };
    if (owed === 0n) {
      // Nothing to pay: the verified zero-value proof only names its payer. No transaction.
      if (!(await recordAuthorization(store, { ...seen, settlementId: null, fromBlock: null })))
        throw replay();
      return settlementHeaders(proof.version, {
        success: true,
        transaction: '',
        network: terms.network,
        payer,
      });
    }

    const settlement = await openSettlement(store, payer, 'x402', chain.treasury).catch((error) => {
      if (error instanceof SettlementInProgressError) throw settlementInProgress();
      throw error;
    });
    attempt.openedAt = settlement?.createdAt;
    if (settlement?.amountAtomic !== owed) {
      // A request of the payer completed since the debt was read: the proof no longer pays it all.
      if (settlement)
        await failSettlement(store, settlement.id, 'the debt grew before its proof was settled');
      const current = (await debtOf(store, payer)).owedAtomic;
      throw refuse(
        `the debt changed while the proof was checked; ${amountReason(authorization.value, current)}`,
        current,
      );
    }
    if (!(await recordAuthorization(store, { ...seen, settlementId: settlement.id, fromBlock }))) {
      await failSettlement(store, settlement.id, 'its payment proof had been used before');
      throw replay();
    }

    let result: SettleResponse;
    let nodeFailed = false;
    try {
      result = await settleProof(
        options,
        'x402 settlement',
        payer,
        settlement.id,
        facilitatorInput(proof, terms),
      );
    } catch (error) {
      // The facilitator did not say what happened: the chain will (see reconcileX402Settlement).
      if (!(facilitator.announcesSends && isTransportFailure(error))) throw settlementPending();
      // The node failed in process: the proof was not judged, and all that was sent for it was
      // announced. Finished as a refusal naming no transaction, but the payer is told to retry.
      nodeFailed = true;
      result = {
        success: false,
        transaction: '',
        network: terms.network,
        errorReason: 'node_unavailable',
        errorMessage: shownReason(error),
      };
    }
    // Success or not, the chain decides: a facilitator's word (a remote one may be wrong, or lie)
    // confirms nothing without the transfer to the treasury (see reconcileX402Settlement).
    const transaction = isHash(result.transaction) ? result.transaction : undefined;
    const failure = result.success
      ? `the facilitator reported transaction ${transaction ?? '(none)'} as settled, but it did not pay the treasury`
      : `the payment could not be settled: ${failureReason(result)}`;
    const refused = result.success ? undefined : result;
    // A remote facilitator may answer before the gateway's node has its receipt.
    if (result.success && transaction) {
      const receipt = await awaitReceipt(outbox, transaction).catch(() => undefined);
      if (receipt && receipt !== 'in-flight')
        options.metrics?.gasSpent('x402', 'settlement', receipt, authorizationShare(receipt, key));
    }
    // Any transaction named (a hash or not) may carry the authorization, which anyone could land;
    // so may one a remote facilitator sent but did not name. Refused with no transaction ever
    // signed for it, nothing the gateway sent can land, but its authorization may have landed:
    // noted before the chain is asked, so a node that cannot say is asked again by the next look.
    if (refused && !result.transaction && facilitator.announcesSends)
      await markSettlementRefused(store, settlement.id, failure);
    const outcome = await reconcile((await findSettlement(store, settlement.id)) as Settlement);
    // Read again: the payer's requests that completed meanwhile add to what its new proof must carry.
    if (outcome === 'failed')
      throw nodeFailed
        ? chainUnavailable(await owedAtomicIfKnown(store, payer))
        : refuse(failure, owed, refused);
    if (outcome === 'pending') throw settlementPending();
    const confirmed = (await findSettlement(store, settlement.id)) as Settlement;
    return settlementHeaders(proof.version, {
      success: true,
      transaction: confirmed.txHash ?? '',
      network: terms.network,
      payer,
    });
  };

  /** Where the search for a settlement's authorization on chain starts. */
  const currentBlockNumber = async (): Promise<bigint> => {
    try {
      return await chain.publicClient.getBlockNumber();
    } catch (error) {
      if (error instanceof BaseError) throw paymentsUnavailable('the chain cannot be read; retry shortly');
      throw error;
    }
  };

  /**
   * A settlement of the payer left unfinished (a crash, a facilitator that went silent) is finished
   * from the chain before anything else is settled: its records count as owed until then.
   */
  const finishUnfinishedSettlement = async (payer: Address): Promise<void> => {
    const [latest] = await settlementsOf(store, payer, { limit: 1 });
    if (!latest || (latest.status !== 'pending' && latest.status !== 'sent')) return;
    if (latest.rail !== 'x402') throw settlementInProgress();
    if ((await reconcile(latest)) === 'pending') throw settlementPending();
  };

  const upto = uptoPayments({
    store,
    chain,
    facilitator,
    withPayerLock: store.withPayerLock,
    commissionBps: options.commissionBps,
    reconcile,
    finishUnfinishedSettlement,
    paymentIdUsed,
    unavailable: (message) => paymentsUnavailable(message),
    describeFailure: failureReason,
    log: options.log,
  });

  const method: PaymentMethod = {
    rail: 'x402',
    recognizes: carriesProof,
    async identify(request): Promise<IdentifiedPayer> {
      const read = readProof(request.headers);
      const terms = await termsOf();
      const url = servedPath(request.url);
      const signInOrigin = requestOrigin(request.headers);
      if (isUptoProof(read))
        return upto.identify(request, read, terms, (payment) =>
          paymentRequiredError(terms, { ...payment, url, version: 2, signInOrigin }),
        );
      const proof = read;
      const { authorization } = proof;
      const payer = authorization.from;
      // Before its signature is verified a proof proves nothing about its payer: the 402 does not tell
      // anyone what an address owes (settleDebt's refusals, after verification, ask for the debt).
      const refuse = (reason: string) =>
        paymentRequiredError(terms, { reason, amountAtomic: 0n, url, version: proof.version, signInOrigin });
      const mismatch = proofMismatch(proof, terms, BigInt(Math.floor(Date.now() / 1000)));
      if (mismatch) throw refuse(mismatch);
      const key = { asset: proof.nonceKeeper ?? terms.asset, payer, nonce: authorization.nonce };
      if (await isAuthorizationSeen(store, key)) throw refuse(replayReason(proof));
      // Read before verification: anyone holding the proof may land its authorization from now on,
      // and its settlement finds that transaction only from here (see reconcileX402Settlement). A
      // chain that cannot be read leaves nothing open.
      const fromBlock = authorization.value === 0n ? null : await currentBlockNumber();
      const verified = await verifyProof(
        options,
        'x402 verification',
        payer,
        facilitatorInput(proof, terms),
        paymentsUnavailable,
      );
      if (!verified.isValid) throw refuse(`the payment proof is not valid: ${failureReason(verified)}`);
      // A facilitator naming the signer whose signature it checked: only that one is the payer. One
      // naming no one (x402 makes it optional) checked the only authorization it was handed.
      if (verified.payer !== undefined && !sameAddress(verified.payer, payer))
        throw refuse(
          `the payment proof is not valid: the facilitator verified a payment by ${verified.payer}, not by ${payer}`,
        );
      const paymentId = requestPaymentId(store, proof, payer, request, {
        used: paymentIdUsed,
        log: options.log,
      });
      return {
        payer,
        settleDebt: async (): Promise<DebtSettled> => {
          await paymentId.take();
          try {
            return {
              headers: await meteredSettlement(options.metrics, (attempt) =>
                settleDebt(proof, terms, url, signInOrigin, fromBlock, attempt),
              ),
              moved: authorization.value > 0n,
            };
          } catch (error) {
            await paymentId.release();
            throw error;
          }
        },
        // A smart account paying by proof may hold a session too: its caps are not this rail's
        // limits, but the debt it leaves is owed all the same.
        spending: async () => ({ limits: [], owedPicoUsd: (await debtOf(store, payer)).owedPicoUsd }),
        refuse: async ({ reason, message, details }) => {
          await paymentId.release();
          const demand = {
            reason: message,
            amountAtomic: BigInt(details.owedAtomic),
            url,
            version: proof.version,
            signInOrigin,
          };
          const required = paymentRequiredError(terms, demand);
          return new GatewayError('payment_required', message, {
            ...required.options,
            details: { reason, ...details },
          });
        },
        owedHeaders: async () => ({ [OWED_HEADER]: (await debtOf(store, payer)).owedAtomic.toString() }),
        recorded: paymentId.complete,
      };
    },
  };

  /**
   * The 402 of a request with no proof: a wallet that signed in is asked exactly what it owes; an
   * `upto` permit must also cover the request's worst case.
   */
  const paymentRequired = async (
    request: Pick<AdmissionRequest, 'url' | 'headers' | 'model' | 'request'>,
  ) => {
    const url = servedPath(request.url);
    const signIn = await readSignIn(request.headers, { store, chain });
    if (signIn && 'payer' in signIn) {
      const owed = (await debtOf(store, signIn.payer)).owedAtomic;
      return demand({
        url,
        amountAtomic: owed,
        uptoAtomic: upto.leastMaximum(request, owed),
        reason: `payment required: ${signIn.payer} (signed in) owes exactly ${owed} USDC atomic units for its completed requests; send a proof (PAYMENT-SIGNATURE) of that amount`,
      });
    }
    const refused = signIn ? `the sign-in (SIGN-IN-WITH-X) proves nothing: ${signIn.refused}; ` : '';
    return demand({
      url,
      amountAtomic: 0n,
      uptoAtomic: upto.leastMaximum(request, 0n),
      signInOrigin: requestOrigin(request.headers),
      reason: `${refused}payment required: send a valid session token, or an x402 payment proof (PAYMENT-SIGNATURE) for the amount asked; a payer that owes nothing signs 0 to name itself, a returning one signs in (SIGN-IN-WITH-X) to be asked what it owes`,
    });
  };

  return {
    method,
    paymentRequired,
    demandPayment: ({ url, reason, amountAtomic }) => demand({ url: servedPath(url), reason, amountAtomic }),
    recover: () => finishUnfinishedX402Settlements(outbox, store.withPayerLock),
    settled: () => upto.settled(),
  };
}

/** Set once a settlement is opened: only those count in the settlement metrics. */
interface SettlementAttempt {
  openedAt?: Date;
}

async function meteredSettlement(
  metrics: SettlementMetrics | undefined,
  settle: (attempt: SettlementAttempt) => Promise<Record<string, string>>,
): Promise<Record<string, string>> {
  const attempt: SettlementAttempt = {};
  const observe = (outcome: SettlementOutcome) => {
    if (attempt.openedAt) metrics?.settled('x402', outcome, (Date.now() - attempt.openedAt.getTime()) / 1000);
  };
  try {
    const headers = await settle(attempt);
    observe('confirmed');
    return headers;
  } catch (error) {
    const code = error instanceof GatewayError ? error.code : undefined;
    observe(
      code === 'payment_required' ? 'refused' : code === 'payments_unavailable' ? 'unavailable' : 'failed',
    );
    throw error;
  }
}

/**
 * 409: the payer's payment identifier already paid for a request (the x402 extension's conflict):
 * its outcome is stated, and nothing is paid or served again.
 */
function paymentIdUsed(claim: PaymentIdClaim, earlier: PaymentIdUse): GatewayError {
  const named = `payment identifier ${claim.id}`;
  const details = { paymentIdentifier: claim.id, requestId: earlier.requestId };
  if (!earlier.sameRequest)
    return new GatewayError(
      'payment_identifier_used',
      `${named} was used by this payer for another request (${earlier.requestId}); choose a new identifier for a new request`,
      { details: { ...details, outcome: 'other_request' } },
    );
  if (earlier.costPicoUsd === undefined)
    return new GatewayError(
      'payment_identifier_used',
      `${named} is paying for request ${earlier.requestId}, still in flight; retry shortly to learn its outcome`,
      {
        headers: { 'retry-after': RETRY_AFTER_SECONDS },
        details: { ...details, outcome: 'in_flight' },
      },
    );
  const cost = formatUsd(earlier.costPicoUsd);
  return new GatewayError(
    'payment_identifier_used',
    `${named} already paid for request ${earlier.requestId}, served at a cost of ${cost} USD; it is not paid or served again`,
    { details: { ...details, outcome: 'served', cost, costPicoUsd: earlier.costPicoUsd.toString() } },
  );
}

function replayReason(proof: PaymentProof): string {
  return `this payment proof was used before (authorization nonce ${proof.authorization.nonce} of ${proof.authorization.from}); sign a new one`;
}

function amountReason(carried: bigint, owed: bigint): string {
  return `the proof carries ${carried} but the payer owes exactly ${owed} USDC atomic units; sign an authorization for ${owed}`;
}

function settlementPending(): GatewayError {
  // Sent and not mined yet, or refused while the chain could not say whether anyone else paid it.
  return paymentsUnavailable(
    'the payment of this payer’s debt is not confirmed yet; retry shortly with a new proof',
  );
}

/**
 * Nothing was paid: the refusal states what the payer owes as it refuses (the amount its new proof
 * must carry, unless more of its requests complete first), when the ledger can say.
 */
function chainUnavailable(owedAtomic: bigint | undefined): GatewayError {
  return paymentsUnavailable(
    'the chain could not be reached to settle the payment; retry shortly with a new proof',
    owedAtomic,
  );
}

function settlementInProgress(): GatewayError {
  return paymentsUnavailable('a settlement of this payer is in progress; retry shortly');
}

/** 503 with retry-after: the payment cannot be decided now, but can be shortly. */
function paymentsUnavailable(message: string, owedAtomic?: bigint): GatewayError {
  return new GatewayError('payments_unavailable', message, {
    headers: { 'retry-after': RETRY_AFTER_SECONDS },
    ...(owedAtomic !== undefined && { details: { owedAtomic: owedAtomic.toString() } }),
  });
}

const MAX_REASON_LENGTH = 300;

/** The facilitator's reason, and the first line of its message (viem's run to pages). */
function failureReason(result: VerifyResponse | SettleResponse): string {
  const reason = 'isValid' in result ? result.invalidReason : result.errorReason;
  const message = ('isValid' in result ? result.invalidMessage : result.errorMessage)?.split('\n')[0];
  const text = [reason ?? 'refused', message].filter(Boolean).join(': ');
  return text.length > MAX_REASON_LENGTH ? `${text.slice(0, MAX_REASON_LENGTH)}…` : text;
}
