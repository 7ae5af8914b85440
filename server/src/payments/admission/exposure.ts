import { atomicCovering, formatUsdcAtomic, PICO_PER_ATOMIC } from '../../billing/money.js';
import {
  affordableOutputTokens,
  promptTokenBound,
  type WorstCase,
  worstCase,
} from '../../billing/worst-case.js';
import type { AdmissionRequest } from '../../services/chat-contracts.js';

// The exposure budget: a request is forwarded only when what its payer owes, plus the worst cases of
// its other requests in flight, plus its own worst case, fits in every limit on what the payer can
// pay (its session's caps, its USDC balance, the bound on payers that never paid). A request without
// an output limit of its own is sent with the largest that fits.

/** One limit on what a payer can still be charged, in USDC atomic units. */
export interface SpendingLimit {
  /**
   * `total`/`period`: its session's delegation caps; `balance`: its USDC; `unproven`: a payer that
   * never paid; `upto`: the maximum of the `upto` permit paying the request.
   */
  kind: 'total' | 'period' | 'balance' | 'unproven' | 'upto';
  /** In words, for the refusal: "the session's total cap of 5 USDC". */
  name: string;
  limitAtomic: bigint;
  /** What the limit still allows (a cap less what was paid through it in its period). */
  availableAtomic: bigint;
}

/** What the limits must cover besides the request (pico-USD). */
export interface Committed {
  /** The payer's debt for completed requests. */
  owedPicoUsd: bigint;
  /** The reservations of the payer's other requests in flight. */
  inFlightPicoUsd: bigint;
}

/** A request as planned before its payer's limits are known: its prompt bound and output limit. */
export interface PlannedRequest {
  model: AdmissionRequest['model'];
  /** The client's own output limit, if it set one. */
  clientOutputTokens?: number;
  /** Reserved while the limits are read: the client's limit, else the model's maximum output. */
  worst: WorstCase;
  commissionBps: number;
}

export function planRequest({ model, request }: AdmissionRequest, commissionBps: number): PlannedRequest {
  const clientOutputTokens = request.max_completion_tokens ?? request.max_tokens ?? undefined;
  const promptTokens = promptTokenBound(request, model);
  const outputTokens = clientOutputTokens ?? model.maxOutputTokens;
  return {
    model,
    clientOutputTokens,
    worst: worstCase(model.pricing, promptTokens, outputTokens, commissionBps),
    commissionBps,
  };
}

/** The request as admitted: its worst case, and whether its output limit was lowered to fit. */
export interface Fit {
  worst: WorstCase;
  /** Set when the client gave no limit and the payer cannot pay for the model's maximum output. */
  clamped: boolean;
}

export type ShortfallReason =
  | 'cap_reached'
  | 'request_exceeds_cap'
  | 'requests_in_flight'
  | 'insufficient_balance'
  | 'unproven_payer_limit'
  | 'upto_maximum_too_low';

/** A request its payer cannot pay for: why, in words, and the figures for the client. */
export interface Shortfall {
  /** `requests_in_flight` is a wait (429): it fits once the payer's other requests complete. */
  reason: ShortfallReason;
  message: string;
  details: ShortfallDetails;
}

/** `error.details` beside `reason`: USDC atomic units as decimal strings. */
export interface ShortfallDetails {
  /** Which limit: `total`/`period` cap, `balance`, `unproven`, `upto`. */
  cap: SpendingLimit['kind'];
  capAtomic: string;
  availableAtomic: string;
  owedAtomic: string;
  /** The most the payer's other requests in flight can cost. */
  inFlightAtomic: string;
  /** The most this request can cost: its prompt bound and output limit at the model's prices. */
  requestMaxAtomic: string;
  /** The largest output limit (`max_tokens`) that would fit now; 0 when none does. */
  maxAffordableTokens: number;
}

export function fitRequest(
  planned: PlannedRequest,
  limits: readonly SpendingLimit[],
  committed: Committed,
): Fit | Shortfall {
  const { model, clientOutputTokens, worst, commissionBps } = planned;
  const { promptTokens } = worst;
  const spare = (limit: SpendingLimit, inFlight = committed.inFlightPicoUsd) =>
    limit.availableAtomic * PICO_PER_ATOMIC - committed.owedPicoUsd - inFlight;
  const affordable = (budget: bigint) =>
    affordableOutputTokens(model.pricing, promptTokens, budget, commissionBps, model.maxOutputTokens);
  let binding: SpendingLimit | undefined;
  for (const limit of limits) if (!binding || spare(limit) < spare(binding)) binding = limit;
  if (!binding) return { worst, clamped: false };
  const budget = spare(binding);
  if (clientOutputTokens !== undefined) {
    if (worst.picoUsd <= budget) return { worst, clamped: false };
  } else {
    const outputTokens = affordable(budget);
    if (outputTokens > 0)
      return {
        worst: worstCase(model.pricing, promptTokens, outputTokens, commissionBps),
        clamped: outputTokens < model.maxOutputTokens,
      };
  }
  // The least this request can ask for: the client's limit, or one token.
  const least = worstCase(model.pricing, promptTokens, clientOutputTokens ?? 1, commissionBps);
  return shortfall(binding, committed, least, model.id, affordable(budget), (limit) => spare(limit, 0n));
}

function shortfall(
  limit: SpendingLimit,
  committed: Committed,
  least: WorstCase,
  model: string,
  maxAffordableTokens: number,
  spareWithoutInFlight: (limit: SpendingLimit) => bigint,
): Shortfall {
  const requestAtomic = atomicCovering(least.picoUsd);
  const owedAtomic = atomicCovering(committed.owedPicoUsd);
  const inFlightAtomic = atomicCovering(committed.inFlightPicoUsd);
  const details: ShortfallDetails = {
    cap: limit.kind,
    capAtomic: limit.limitAtomic.toString(),
    availableAtomic: limit.availableAtomic.toString(),
    owedAtomic: owedAtomic.toString(),
    inFlightAtomic: inFlightAtomic.toString(),
    requestMaxAtomic: requestAtomic.toString(),
    maxAffordableTokens,
  };
  const usdc = (atomic: bigint) => `${formatUsdcAtomic(atomic)} USDC`;
  const worst = `this request may cost up to ${usdc(requestAtomic)} (a prompt of up to ${least.promptTokens} tokens and ${least.outputTokens} output tokens of ${model})`;
  const limitText = `${limit.name} of ${usdc(limit.limitAtomic)}`;
  const retrySmaller =
    maxAffordableTokens > 0 ? `set max_tokens to at most ${maxAffordableTokens}` : 'send a shorter prompt';
  const remedy = REMEDY[limit.kind];
  const alone = limit.kind === 'balance' ? limit.availableAtomic : limit.limitAtomic;
  if (requestAtomic > alone)
    return {
      reason: ALONE_REFUSED[limit.kind],
      message: `${worst}, more than ${limitText}: ${retrySmaller}, ${remedy}`,
      details,
    };
  const left = limit.kind === 'period' ? ' in this period' : '';
  if (least.picoUsd <= spareWithoutInFlight(limit))
    return {
      reason: 'requests_in_flight',
      message: `${limitText} has ${usdc(limit.availableAtomic)} left${left}; ${usdc(owedAtomic)} is owed, your requests in flight may cost up to ${usdc(inFlightAtomic)} and ${worst}: retry when one of them completes`,
      details,
    };
  const inFlight =
    committed.inFlightPicoUsd > 0n ? `, your requests in flight may cost up to ${usdc(inFlightAtomic)}` : '';
  const wait = limit.kind === 'period' ? ' wait for the next period,' : '';
  return {
    reason: REFUSED[limit.kind],
    message: `${limitText} has ${usdc(limit.availableAtomic)} left${left}; ${usdc(owedAtomic)} is owed${inFlight} and ${worst}: ${retrySmaller},${wait} ${remedy}`,
    details,
  };
}

/** The refusal of a request beyond what is left of a limit. */
const REFUSED: Record<SpendingLimit['kind'], ShortfallReason> = {
  total: 'cap_reached',
  period: 'cap_reached',
  balance: 'insufficient_balance',
  unproven: 'unproven_payer_limit',
  upto: 'upto_maximum_too_low',
};

/** The refusal of a request that alone is beyond a limit. */
const ALONE_REFUSED: Record<SpendingLimit['kind'], ShortfallReason> = {
  ...REFUSED,
  total: 'request_exceeds_cap',
  period: 'request_exceeds_cap',
};

const REMEDY: Record<SpendingLimit['kind'], string> = {
  total: 'or authorize a session with a larger cap',
  period: 'or authorize a session with a larger cap',
  balance: 'or add USDC to the paying account',
  unproven: 'or pay this request in smaller steps until a first payment is confirmed',
  upto: 'or sign an upto permit for at least the amount the 402 asks',
};
