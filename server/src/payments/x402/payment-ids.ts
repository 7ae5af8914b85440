import { createHash } from 'node:crypto';
import type { Address } from 'viem';
import type { AdmissionRequest, StatedCost } from '../../services/chat-contracts.js';
import type { Store } from '../../store/database.js';

/**
 * Payment identifiers (x402 `payment-identifier`): the idempotency key a payer puts in its proof.
 * Keyed by payer and id in the ledger, so a retried request is paid and served once across
 * instances and restarts. A claim lapses after LEASE_MS unless its request completed (a request
 * refused or failed before its usage was recorded was neither paid for nor served); an id is
 * forgotten after KEPT_MS.
 */
// Longer than a request can run by default: UPSTREAM_COMPLETION_TIMEOUT_MS (10 min) after its settlement.
const LEASE_MS = 15 * 60 * 1000;
const KEPT_MS = 24 * 60 * 60 * 1000;

/** What became of the first request that carried an id. */
export interface PaymentIdUse {
  requestId: string;
  sameRequest: boolean;
  /** Pico-USD it cost once its usage was recorded; undefined while it is in flight. */
  costPicoUsd?: bigint;
  /** Epoch ms when an in-flight claim lapses. */
  leaseUntil: number;
}

export interface PaymentIdClaim {
  payer: Address;
  id: string;
  /** The request body, hashed: the same id on a different request is a conflict. */
  body: unknown;
  requestId: string;
}

/** Claims the id for this request; returns the earlier use when another request holds it. */
export async function claimPaymentId(store: Store, claim: PaymentIdClaim): Promise<PaymentIdUse | undefined> {
  const now = Date.now();
  const requestHash = createHash('sha256').update(JSON.stringify(claim.body)).digest('hex');
  await store.db.deleteFrom('x402_payment_ids').where('expires_at', '<', BigInt(now)).execute();
  const inserted = await store.db
    .insertInto('x402_payment_ids')
    .values({
      payer: claim.payer,
      payment_id: claim.id,
      request_hash: requestHash,
      request_id: claim.requestId,
      cost_pico: null,
      lease_until: now + LEASE_MS,
      expires_at: now + KEPT_MS,
      created_at: now,
    })
    .onConflict((conflict) => conflict.columns(['payer', 'payment_id']).doNothing())
    .returning('payment_id')
    .executeTakeFirst();
  if (inserted) return undefined;
  // A lapsed claim of the same request is taken over: its request never completed.
  const retaken = await store.db
    .updateTable('x402_payment_ids')
    .set({ request_id: claim.requestId, lease_until: now + LEASE_MS })
    .where('payer', '=', claim.payer)
    .where('payment_id', '=', claim.id)
    .where('request_hash', '=', requestHash)
    .where('cost_pico', 'is', null)
    .where('lease_until', '<', BigInt(now))
    .returning('payment_id')
    .executeTakeFirst();
  if (retaken) return undefined;
  const row = await store.db
    .selectFrom('x402_payment_ids')
    .selectAll()
    .where('payer', '=', claim.payer)
    .where('payment_id', '=', claim.id)
    .executeTakeFirstOrThrow();
  return {
    requestId: row.request_id,
    sameRequest: row.request_hash === requestHash,
    costPicoUsd: row.cost_pico ?? undefined,
    leaseUntil: Number(row.lease_until),
  };
}

/** The request holding the id completed: its cost is what a retry is told. */
export async function completePaymentId(
  store: Store,
  claim: PaymentIdClaim,
  costPicoUsd: bigint,
): Promise<void> {
  await store.db
    .updateTable('x402_payment_ids')
    .set({ cost_pico: costPicoUsd })
    .where('payer', '=', claim.payer)
    .where('payment_id', '=', claim.id)
    .where('request_id', '=', claim.requestId)
    .execute();
}

/** The request holding the id was refused before it was served: a retry may use the id. */
export async function releasePaymentId(store: Store, claim: PaymentIdClaim): Promise<void> {
  await store.db
    .deleteFrom('x402_payment_ids')
    .where('payer', '=', claim.payer)
    .where('payment_id', '=', claim.id)
    .where('request_id', '=', claim.requestId)
    .where('cost_pico', 'is', null)
    .execute();
}

/** What a request does with the payment identifier its proof carries; each step does nothing without one. */
export interface RequestPaymentId {
  /** Under the payer's lock, before anything is paid: a retried id pays and is served once. */
  take(): Promise<void>;
  /** The request was refused: a retry may use the id. */
  release(): Promise<void>;
  /** The request's usage was recorded: a retry is told its cost. A failure is logged, not thrown. */
  complete(cost: StatedCost): void;
}

export function requestPaymentId(
  store: Store,
  proof: { paymentId?: string },
  payer: Address,
  request: Pick<AdmissionRequest, 'request' | 'requestId'>,
  options: {
    /** The refusal of an id another request holds. */
    used(claim: PaymentIdClaim, earlier: PaymentIdUse): Error;
    log?: { error(details: object, message: string): void };
  },
): RequestPaymentId {
  const claim: PaymentIdClaim | undefined = proof.paymentId
    ? { payer, id: proof.paymentId, body: request.request, requestId: request.requestId }
    : undefined;
  return {
    async take() {
      const earlier = claim && (await claimPaymentId(store, claim));
      if (claim && earlier) throw options.used(claim, earlier);
    },
    async release() {
      if (claim) await releasePaymentId(store, claim);
    },
    complete(cost) {
      if (claim)
        completePaymentId(store, claim, BigInt(cost.totalPicoUsd)).catch((error: unknown) =>
          options.log?.error({ err: error, payer }, 'x402: a payment identifier’s outcome was not recorded'),
        );
    },
  };
}
