import type { SettleResponse, VerifyResponse } from '@x402/core/types';
import type { Address } from 'viem';
import { debtOf } from '../../billing/ledger.js';
import { atomicCovering } from '../../billing/money.js';
import {
  failSettlement,
  findSettlement,
  markSettlementRefused,
  openSettlement,
  type Settlement,
  SettlementInProgressError,
} from '../../billing/settlements.js';
import { GatewayError } from '../../errors.js';
import type { SettlementMetrics } from '../../observability/index.js';
import type { AdmissionRequest } from '../../services/chat-contracts.js';
import type { Store } from '../../store/database.js';
import type { PayerLock } from '../../store/payer-lock.js';
import { type IdentifiedPayer, planRequest } from '../admission/index.js';
import type { ChainClient } from '../chain/index.js';
import {
  attachAuthorization,
  forgetUnusedAuthorization,
  isAuthorizationSeen,
  recordAuthorization,
} from './authorizations.js';
import { type PaymentFacilitator, settleProof, verifyProof } from './facilitator.js';
import { type PaymentIdClaim, type PaymentIdUse, requestPaymentId } from './payment-ids.js';
import type { UptoProof } from './proof.js';
import type { ReconcileOutcome } from './reconcile.js';
import type { PaymentDemand, X402Terms } from './terms.js';
import { permit2NonceKey, uptoFacilitatorInput, uptoMismatch } from './upto.js';

export interface UptoPaymentsOptions {
  store: Store;
  chain: ChainClient;
  facilitator: PaymentFacilitator;
  withPayerLock: PayerLock;
  /** COMMISSION_BPS: part of a request's worst case, which a permit's maximum must cover. */
  commissionBps: number;
  /** Finishes what the chain says of an x402 settlement (a node that cannot say leaves it pending). */
  reconcile(settlement: Settlement): Promise<ReconcileOutcome>;
  /** Finishes the payer's x402 settlement left unfinished, or throws the 503 that says it is pending. */
  finishUnfinishedSettlement(payer: Address): Promise<void>;
  /** The 409 of a payment identifier used before. */
  paymentIdUsed(claim: PaymentIdClaim, earlier: PaymentIdUse): GatewayError;
  /** The 503 of a facilitator that cannot be reached. */
  unavailable(message: string): GatewayError;
  describeFailure(result: VerifyResponse | SettleResponse): string;
  log?: {
    error(details: object, message: string): void;
    warn?(details: object, message: string): void;
  };
  metrics?: SettlementMetrics;
}

/**
 * The `upto` scheme: a payer signs a Permit2 maximum for its request (what it owes and the request's
 * worst case); the request is served at once, its maximum standing in for the bound on payers with
 * no payment yet, and once it completes the gateway settles exactly what the payer owes (0 moves
 * nothing) from that permit.
 */
export function uptoPayments(options: UptoPaymentsOptions) {
  const { store, chain } = options;
  const underWay = new Set<Promise<void>>();

  /** The least maximum a permit must allow for this request: what the payer owes and the request's worst case. */
  const leastMaximum = (request: Pick<AdmissionRequest, 'model' | 'request'>, owedAtomic: bigint) =>
    owedAtomic +
    atomicCovering(planRequest(request as AdmissionRequest, options.commissionBps).worst.picoUsd);

  /**
   * Settles what the payer owes once its request completed, under its lock: every record it has not
   * paid yet (this request's and any earlier), when their total fits in the permit's maximum. What
   * cannot be settled stays owed, and the payer's next request pays it first.
   */
  const settleCompleted = async (proof: UptoProof, terms: X402Terms): Promise<void> => {
    const { permit } = proof;
    const payer = permit.from;
    await options.finishUnfinishedSettlement(payer);
    const settlement = await openSettlement(store, payer, 'x402', terms.payTo);
    // Nothing owed (a request that cost 0, or one the payer's credit paid): nothing moves.
    if (!settlement) return;
    if (settlement.amountAtomic > permit.maxAtomic) {
      await failSettlement(
        store,
        settlement.id,
        `the payer owes ${settlement.amountAtomic}, more than its upto permit's maximum of ${permit.maxAtomic}`,
      );
      return;
    }
    const fromBlock = await chain.publicClient.getBlockNumber();
    await attachAuthorization(store, permit2NonceKey(permit), { id: settlement.id, fromBlock });
    const result = await settleProof(
      options,
      'upto settlement',
      payer,
      settlement.id,
      uptoFacilitatorInput(proof, terms, settlement.amountAtomic),
    ).catch(() => undefined);
    // Unknown outcome: the chain will say (the collector and the payer's next request reconcile it).
    if (!result) return;
    if (!result.success && !result.transaction)
      await markSettlementRefused(
        store,
        settlement.id,
        `the upto permit could not be settled: ${options.describeFailure(result)}`,
      );
    const outcome = await options.reconcile((await findSettlement(store, settlement.id)) as Settlement);
    if (outcome !== 'confirmed')
      options.log?.warn?.(
        { payer, settlement: settlement.id, outcome, reason: result.errorReason },
        'upto settlement not confirmed; the debt stays owed',
      );
  };

  const queueSettlement = (proof: UptoProof, terms: X402Terms) => {
    const payer = proof.permit.from;
    // Begun after the answer is written: on SQLite the settlement's first steps run synchronously.
    const job = new Promise<void>((resolve) => setImmediate(resolve))
      .then(() => options.withPayerLock(payer, () => settleCompleted(proof, terms)))
      .catch((error: unknown) => {
        if (error instanceof SettlementInProgressError || error instanceof GatewayError) {
          options.log?.warn?.({ err: error, payer }, 'upto settlement deferred; the debt stays owed');
          return;
        }
        options.log?.error({ err: error, payer }, 'upto settlement failed; the debt stays owed');
      })
      .finally(() => underWay.delete(job));
    underWay.add(job);
  };

  /** Verifies an `upto` proof and names its payer; its request is settled once it completes. */
  const identify = async (
    request: AdmissionRequest,
    proof: UptoProof,
    terms: X402Terms,
    demand: (payment: Omit<PaymentDemand, 'url'>) => GatewayError,
  ): Promise<IdentifiedPayer> => {
    const { permit } = proof;
    const payer = permit.from;
    const refuse = (reason: string) => demand({ reason, amountAtomic: 0n });
    const mismatch = uptoMismatch(permit, proof.accepted, terms, BigInt(Math.floor(Date.now() / 1000)));
    if (mismatch) throw refuse(mismatch);
    const key = permit2NonceKey(permit);
    const replay = () =>
      refuse(`this upto permit was used before (Permit2 nonce ${permit.nonce} of ${payer}); sign a new one`);
    if (await isAuthorizationSeen(store, key)) throw replay();
    // Verified against its maximum: x402 simulates settling all of it, so the payer's balance and
    // Permit2 allowance (or its EIP-2612 permit for Permit2) cover the maximum now.
    const verified = await verifyProof(
      options,
      'x402 upto verification',
      payer,
      uptoFacilitatorInput(proof, terms, permit.maxAtomic),
      options.unavailable,
    );
    if (!verified.isValid)
      throw refuse(`the payment proof is not valid: ${options.describeFailure(verified)}`);
    const paymentId = requestPaymentId(store, proof, payer, request, {
      used: options.paymentIdUsed,
      log: options.log,
    });
    return {
      payer,
      settleDebt: async () => {
        await paymentId.take();
        try {
          await options.finishUnfinishedSettlement(payer);
          const seen = {
            ...key,
            valueAtomic: permit.maxAtomic,
            // Permit2 accepts it through its deadline's second.
            validBefore: permit.deadline + 1n,
            settlementId: null,
            fromBlock: null,
          };
          if (!(await recordAuthorization(store, seen))) throw replay();
        } catch (error) {
          await paymentId.release();
          throw error;
        }
        // Nothing is paid before the request: the permit pays its debt and its cost once it completes.
        return { headers: {}, moved: false };
      },
      spending: async () => ({
        limits: [
          {
            kind: 'upto',
            name: 'the upto permit’s maximum',
            limitAtomic: permit.maxAtomic,
            availableAtomic: permit.maxAtomic,
          },
        ],
        owedPicoUsd: (await debtOf(store, payer)).owedPicoUsd,
        paidUpTo: true,
      }),
      refuse: async ({ reason, message, details }) => {
        await Promise.all([paymentId.release(), forgetUnusedAuthorization(store, key)]);
        const owed = BigInt(details.owedAtomic);
        const required = demand({
          reason: message,
          amountAtomic: owed,
          uptoAtomic: leastMaximum(request, owed),
        });
        return new GatewayError('payment_required', message, {
          ...required.options,
          details: { reason, ...details },
        });
      },
      recorded: (cost) => {
        paymentId.complete(cost);
        queueSettlement(proof, terms);
      },
    };
  };

  return {
    identify,
    leastMaximum,
    /** Waits for the settlements of completed requests (shutdown, tests). */
    async settled(): Promise<void> {
      while (underWay.size > 0) await Promise.all(underWay);
    },
  };
}
