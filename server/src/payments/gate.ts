import type { IncomingHttpHeaders } from 'node:http';
import type { Address } from 'viem';
import type { ApiError } from '../http/errors.js';
import type { Admission, AdmissionRequest, PaymentGate, PaymentRail } from '../services/chat-contracts.js';
import type { PayerLock } from '../store/payer-lock.js';
import type { InFlightLimiter } from './in-flight.js';

/** A payer named by a verified credential, and how to pay what it owes. */
export interface IdentifiedPayer {
  payer: Address;
  /**
   * What the request's in-flight slot reserves until it completes (pico-USD): the most it can cost,
   * for the checks of the payer's other requests in flight at once. 0 when not given.
   */
  reservePicoUsd?: bigint;
  /** See `Admission.outputTokens`. */
  outputTokens: number;
  /**
   * Settles everything the payer owes for completed requests and waits for confirmation.
   * Runs under the payer's lock. Returns headers for the response; throws ApiError 402 when
   * the debt cannot be paid, and the refusal `owesNothing` would make when the credential stopped
   * standing while the request waited on the lock (the session rail: revoked or expired meanwhile).
   * `othersReservedPicoUsd`: what the payer's other requests in flight reserved (see `InFlightSlot`).
   */
  settleDebt(othersReservedPicoUsd: bigint): Promise<Record<string, string>>;
  /** See `Admission.owedHeaders`. */
  owedHeaders?(): Promise<Record<string, string>>;
  /** See `Admission.recorded`. */
  recorded?: Admission['recorded'];
  /**
   * A read-only check, made once the payer's in-flight slot is held and outside the payer's lock:
   * true when the payer cannot owe anything (no unpaid record costing something, no settlement in
   * flight), so there is nothing to settle and the lock is not taken. Read after the slot is taken,
   * so that a request of the payer that completed and freed a slot is seen: the bound on what a
   * payer owes unsettled holds. The rail may refuse the payer here too (the session rail reads
   * whether the session still stands in the same round trip: 401 when it does not).
   */
  owesNothing?(othersReservedPicoUsd: bigint): Promise<boolean>;
}

/** One payment rail (session-key JWT, x402 proof): how it recognizes and identifies a payer. */
export interface PaymentMethod {
  readonly rail: PaymentRail;
  /** Whether the request carries this rail's credential at all. */
  recognizes(headers: IncomingHttpHeaders): boolean;
  /** Verifies the credential (ApiError 401/402 when it is not acceptable) and names the payer. */
  identify(request: AdmissionRequest): Promise<IdentifiedPayer>;
}

export interface PaymentGateOptions {
  /** Tried in order; the first that recognizes the request's credential handles it. */
  methods: PaymentMethod[];
  inFlight: InFlightLimiter;
  withPayerLock: PayerLock;
  /** The answer for a request carrying no credential at all (402 with payment requirements). */
  paymentRequired(request: AdmissionRequest): ApiError | Promise<ApiError>;
}

/**
 * The ordering rule: a request is forwarded only once everything its payer owes is settled.
 * Concurrent requests of one payer queue on the payer lock, so a debt is settled once; the
 * in-flight slot bounds what the payer can owe unsettled.
 */
export function createPaymentGate(options: PaymentGateOptions): PaymentGate {
  return {
    async admit(request: AdmissionRequest): Promise<Admission> {
      const method = options.methods.find((candidate) => candidate.recognizes(request.headers));
      if (!method) throw await options.paymentRequired(request);
      const identified = await method.identify(request);
      const slot = await options.inFlight.acquire(identified.payer, identified.reservePicoUsd);
      const { othersReservedPicoUsd } = slot;
      try {
        const responseHeaders = (await identified.owesNothing?.(othersReservedPicoUsd))
          ? {}
          : await options.withPayerLock(identified.payer, () => identified.settleDebt(othersReservedPicoUsd));
        return {
          payer: identified.payer,
          rail: method.rail,
          outputTokens: identified.outputTokens,
          responseHeaders,
          owedHeaders: identified.owedHeaders,
          recorded: identified.recorded,
          release: slot.release,
        };
      } catch (error) {
        slot.release();
        throw error;
      }
    },
  };
}
