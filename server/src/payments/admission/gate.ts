import type { IncomingHttpHeaders } from 'node:http';
import { type Address, BaseError } from 'viem';
import { GatewayError } from '../../errors.js';
import type { Admission, AdmissionRequest, PaymentGate, PaymentRail } from '../../services/chat-contracts.js';
import type { PayerLock } from '../../store/payer-lock.js';
import type { BalanceReader } from '../chain/index.js';
import { type Fit, fitRequest, planRequest, type Shortfall, type SpendingLimit } from './exposure.js';
import type { InFlightLimiter } from './in-flight.js';
import type { ExposureTaken, UnprovenPolicy } from './unproven.js';

/** The response header of an answer whose output limit the gateway lowered to what its payer can pay. */
export const OUTPUT_LIMIT_HEADER = 'x-output-tokens-limit';

/** What a settlement of the payer's debt did: headers for the response, and whether USDC moved. */
export interface DebtSettled {
  headers: Record<string, string>;
  /** The payer's balance changed: it is read again. */
  moved: boolean;
}

/** What limits a payer's spending besides its USDC balance, once its debt is settled. */
export interface Spending {
  /** Its session's caps (none for a payer by proof). */
  limits: SpendingLimit[];
  /** What it owes for requests completed since its debt was settled (pico-USD). */
  owedPicoUsd: bigint;
  /**
   * Its request is paid by a signed maximum (an x402 `upto` permit, among `limits`) that the
   * gateway settles once it completes: the per-payer bound on payers with no payment yet does not
   * apply (the hourly ceiling on them does).
   */
  paidUpTo?: boolean;
}

/** A payer named by a verified credential, and how to pay what it owes. */
export interface IdentifiedPayer {
  payer: Address;
  /**
   * Settles everything the payer owes for completed requests and waits for confirmation.
   * Runs under the payer's lock. Throws GatewayError 402 when the debt cannot be paid, and the refusal
   * `owesNothing` would make when the credential stopped standing while the request waited on the
   * lock (the session rail: revoked or expired meanwhile).
   */
  settleDebt(): Promise<DebtSettled>;
  /**
   * A read-only check, made once the payer's in-flight slot is held and outside the payer's lock:
   * true when the payer cannot owe anything (no unpaid record costing something, no settlement in
   * flight), so there is nothing to settle and the lock is not taken. Read after the slot is taken,
   * so that a request of the payer that completed and freed a slot is seen. The rail may refuse the
   * payer here too (the session rail reads whether the session still stands in the same round
   * trip: 401 when it does not).
   */
  owesNothing?(): Promise<boolean>;
  /** Read after `settleDebt` or `owesNothing`. */
  spending(): Promise<Spending>;
  /** The 402 (in the rail's terms) for a request the payer cannot pay for. */
  refuse(shortfall: Shortfall): Promise<GatewayError>;
  /** See `Admission.owedHeaders`. */
  owedHeaders?(): Promise<Record<string, string>>;
  /** See `Admission.recorded`. */
  recorded?: Admission['recorded'];
}

/** One payment rail (session-key JWT, x402 proof): how it recognizes and identifies a payer. */
export interface PaymentMethod {
  readonly rail: PaymentRail;
  /** Whether the request carries this rail's credential at all. */
  recognizes(headers: IncomingHttpHeaders): boolean;
  /** Verifies the credential (GatewayError 401/402 when it is not acceptable) and names the payer. */
  identify(request: AdmissionRequest): Promise<IdentifiedPayer>;
}

export interface PaymentGateOptions {
  /** Tried in order; the first that recognizes the request's credential handles it. */
  methods: PaymentMethod[];
  inFlight: InFlightLimiter;
  withPayerLock: PayerLock;
  /** The answer for a request carrying no credential at all (402 with payment requirements). */
  paymentRequired(request: AdmissionRequest): GatewayError | Promise<GatewayError>;
  /** COMMISSION_BPS: part of a request's worst case. */
  commissionBps: number;
  balances: BalanceReader;
  unproven: UnprovenPolicy;
}

const RETRY_AFTER_SECONDS = '2';
const IN_FLIGHT_RETRY_AFTER_SECONDS = '1';

/**
 * The ordering rule and the exposure budget: a request is forwarded only once everything its payer
 * owes is settled, and only when its worst case fits in what the payer can still pay. Concurrent
 * requests of one payer queue on the payer lock, so a debt is settled once; each holds an in-flight
 * slot reserving its worst case, which the others count.
 */
export function createPaymentGate(options: PaymentGateOptions): PaymentGate {
  /** What the payer can pay: the rail's limits, its USDC, and the bound on payers that never paid. */
  const limitsOf = async (identified: IdentifiedPayer, moved: boolean) => {
    const [spending, balanceAtomic, proven] = await Promise.all([
      identified.spending(),
      options.balances.usdcOf(identified.payer, { fresh: moved }),
      options.unproven.isProven(identified.payer),
    ]);
    const limits: SpendingLimit[] = [
      ...spending.limits,
      {
        kind: 'balance',
        name: 'the USDC balance',
        limitAtomic: balanceAtomic,
        availableAtomic: balanceAtomic,
      },
    ];
    // A permit's maximum stands in for the per-payer bound, but locks no funds: the hour's ceiling still counts it.
    if (!proven && !spending.paidUpTo) {
      const max = options.unproven.payerMaxAtomic;
      limits.push({
        kind: 'unproven',
        name: 'the limit on payers with no payment yet',
        limitAtomic: max,
        availableAtomic: max,
      });
    }
    return { limits, owedPicoUsd: spending.owedPicoUsd, proven };
  };

  return {
    async admit(request: AdmissionRequest): Promise<Admission> {
      const method = options.methods.find((candidate) => candidate.recognizes(request.headers));
      if (!method) throw await options.paymentRequired(request);
      const identified = await method.identify(request);
      const planned = planRequest(request, options.commissionBps);
      const slot = await options.inFlight.acquire(identified.payer, planned.worst.picoUsd);
      let taken: ExposureTaken | undefined;
      try {
        const settled = (await identified.owesNothing?.())
          ? { headers: {}, moved: false }
          : await options.withPayerLock(identified.payer, () => identified.settleDebt());
        const { limits, owedPicoUsd, proven } = await limitsOf(identified, settled.moved).catch(
          chainUnreadable,
        );
        const fit = fitRequest(planned, limits, { owedPicoUsd, inFlightPicoUsd: slot.othersReservedPicoUsd });
        if (!('worst' in fit)) throw await refusal(identified, fit);
        slot.lower(fit.worst.picoUsd).catch(() => undefined);
        if (!proven) taken = await options.unproven.take(fit.worst.picoUsd);
        const share = taken;
        return {
          payer: identified.payer,
          rail: method.rail,
          outputTokens: fit.worst.outputTokens,
          responseHeaders: { ...settled.headers, ...clampedHeaders(fit) },
          owedHeaders: identified.owedHeaders,
          recorded(cost) {
            share?.cost(BigInt(cost.totalPicoUsd));
            identified.recorded?.(cost);
          },
          release() {
            share?.release();
            slot.release();
          },
        };
      } catch (error) {
        taken?.release();
        slot.release();
        throw error;
      }
    },
  };
}

/** 429 (retried by OpenAI's clients) for a request that fits once the payer's others complete; else 402. */
async function refusal(identified: IdentifiedPayer, shortfall: Shortfall): Promise<GatewayError> {
  const { reason, message, details } = shortfall;
  if (reason === 'requests_in_flight')
    return new GatewayError('too_many_in_flight', message, {
      headers: { 'retry-after': IN_FLIGHT_RETRY_AFTER_SECONDS },
      details: { reason, ...details },
    });
  return identified.refuse(shortfall);
}

function clampedHeaders(fit: Fit): Record<string, string> {
  return fit.clamped ? { [OUTPUT_LIMIT_HEADER]: String(fit.worst.outputTokens) } : {};
}

function chainUnreadable(error: unknown): never {
  if (error instanceof BaseError)
    throw new GatewayError(
      'payments_unavailable',
      'the payer’s USDC balance cannot be read from the chain; retry shortly',
      {
        headers: { 'retry-after': RETRY_AFTER_SECONDS },
      },
    );
  throw error;
}
