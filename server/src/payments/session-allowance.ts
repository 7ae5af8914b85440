import { atomicCovering, formatUsdcAtomic } from '../billing/money.js';
import { outputCostBound } from '../billing/pricing.js';
import type { SessionPaid } from '../billing/settlements.js';
import type { SessionLimits } from '../client/types.js';
import type { AdmissionRequest } from '../services/chat-contracts.js';
import type { Store } from '../store/database.js';
import { periodIndex } from '../store/sessions.js';
import { findSession, type SessionRecord } from './session-records.js';
import type { RefusalReason } from './settlement-errors.js';

// A settlement is one transfer of everything owed, which the delegation's caveats refuse once it
// exceeds what they still allow: a debt beyond that can never be paid through the session. So a
// request is forwarded only when what its payer owes, plus the most its other requests in flight can
// cost, plus the most the request can cost, fits in what the session's delegation can still pay, as
// the ledger tells it (no chain read per request): the session's running totals of what its confirmed
// settlements paid (total, and in the current period of a per-period cap), read with its standing
// before every request.

/** What the caps are read from: fixed once a session is stored. */
type SessionCaps = Pick<SessionRecord, 'limits'>;

/** The most a request can cost before it is forwarded (its output; its prompt is not counted). */
export interface RequestBound {
  model: string;
  outputTokens: number;
  picoUsd: bigint;
}

/** A request the session cannot pay for: why, in words, and the figures for the client. */
export interface CapShortfall {
  /**
   * `cap_reached` as when the chain refuses; `request_exceeds_cap`: the request alone is beyond the
   * cap; `requests_in_flight`: it fits beside the debt, not beside the payer's other requests in
   * flight, which may cost much less than their most once they complete (a wait, not a refusal).
   */
  reason: Extract<RefusalReason, 'cap_reached'> | 'request_exceeds_cap' | 'requests_in_flight';
  message: string;
  details: CapDetails;
}

/** `error.details` of the 402, beside `reason`: USDC atomic units as decimal strings. */
export interface CapDetails {
  /** Which cap: over the delegation's life, or per period. */
  cap: 'total' | 'period';
  capAtomic: string;
  /** What the cap still allows (in the current period, for a per-period cap). */
  availableAtomic: string;
  /** What the payer owes for completed requests, paid through the same delegation. */
  owedAtomic: string;
  /** The most the payer's other requests in flight can cost (they will be owed too). */
  inFlightAtomic: string;
  /** The most this request can cost (its output token limit at the model's output price). */
  requestMaxAtomic: string;
}

/** The request's output token limit (as the providers send it) at the model's output price. */
export function requestBound(admission: AdmissionRequest, commissionBps: number): RequestBound {
  const { model, request } = admission;
  const outputTokens = request.max_completion_tokens ?? request.max_tokens ?? model.defaultMaxTokens;
  return {
    model: model.id,
    outputTokens,
    picoUsd: outputCostBound(model.pricing, outputTokens, commissionBps),
  };
}

// Enough for every session in use at once; beyond it the oldest entry is read again when next needed.
const CACHED_SESSIONS = 10_000;

/**
 * The caps of a session by id, read from the store once per process: they never change, so the
 * requests after a session's first ask the store only what moves (its standing and what it paid,
 * never cached: another instance may confirm a settlement meanwhile).
 */
export function sessionCapsReader(store: Store): (sessionId: string) => Promise<SessionCaps | undefined> {
  const cache = new Map<string, SessionCaps>();
  return async (sessionId) => {
    const known = cache.get(sessionId);
    if (known) return known;
    const session = await findSession(store, sessionId);
    if (!session) return undefined;
    const oldest = cache.keys().next();
    if (cache.size >= CACHED_SESSIONS && !oldest.done) cache.delete(oldest.value);
    const caps = { limits: session.limits };
    cache.set(sessionId, caps);
    return caps;
  };
}

/** What the delegation is already committed to pay, besides the request (pico-USD). */
export interface Committed {
  /** The payer's debt for completed requests (0 when it owes nothing). */
  owedPicoUsd: bigint;
  /** The reservations of the payer's other requests in flight (see `InFlightSlot`). */
  inFlightPicoUsd: bigint;
}

/**
 * Why the session's delegation cannot pay what is `committed` plus the request's bound, or undefined
 * when it can. `paid`: what the session's confirmed settlements paid through its delegation; of it,
 * the period cap counts only what was paid in the period `now` falls in.
 */
export function capShortfall(
  limits: SessionLimits,
  paid: SessionPaid,
  committed: Committed,
  bound: RequestBound,
  now = new Date(),
): CapShortfall | undefined {
  for (const cap of capsOf(limits, paid, now.getTime())) {
    const shortfall = shortfallOf(cap, committed, bound);
    if (shortfall) return shortfall;
  }
  return undefined;
}

function shortfallOf(cap: Cap, committed: Committed, bound: RequestBound): CapShortfall | undefined {
  const boundAtomic = atomicCovering(bound.picoUsd);
  const availableAtomic = cap.atomic > cap.paidAtomic ? cap.atomic - cap.paidAtomic : 0n;
  // What the settlements still to come may transfer through the delegation: the debt, the requests
  // in flight and this one, rounded up as one settlement of them all would be.
  const { owedPicoUsd, inFlightPicoUsd } = committed;
  const atMost = atomicCovering(owedPicoUsd + inFlightPicoUsd + bound.picoUsd);
  if (boundAtomic <= cap.atomic && atMost <= availableAtomic) return undefined;
  const owedAtomic = atomicCovering(owedPicoUsd);
  const inFlightAtomic = atomicCovering(inFlightPicoUsd);
  const details: CapDetails = {
    cap: cap.kind,
    capAtomic: cap.atomic.toString(),
    availableAtomic: availableAtomic.toString(),
    owedAtomic: owedAtomic.toString(),
    inFlightAtomic: inFlightAtomic.toString(),
    requestMaxAtomic: boundAtomic.toString(),
  };
  const usdc = (atomic: bigint) => `${formatUsdcAtomic(atomic)} USDC`;
  const worst = `this request may cost up to ${usdc(boundAtomic)} (${bound.outputTokens} output tokens of ${bound.model})`;
  const capText = `the session's ${cap.name} of ${usdc(cap.atomic)}`;
  const remedy = 'or authorize a session with a larger cap';
  if (boundAtomic > cap.atomic)
    return {
      reason: 'request_exceeds_cap',
      message: `${worst}, more than ${capText}: lower max_tokens, ${remedy}`,
      details,
    };
  const [left, wait] = cap.kind === 'period' ? [' in this period', ' wait for the next period,'] : ['', ''];
  if (atomicCovering(owedPicoUsd + bound.picoUsd) <= availableAtomic)
    return {
      reason: 'requests_in_flight',
      message: `${capText} has ${usdc(availableAtomic)} left${left}; ${usdc(owedAtomic)} is owed, your requests in flight may cost up to ${usdc(inFlightAtomic)} and ${worst}: retry when one of them completes`,
      details,
    };
  const inFlight =
    inFlightPicoUsd > 0n ? `, your requests in flight may cost up to ${usdc(inFlightAtomic)}` : '';
  return {
    reason: 'cap_reached',
    message: `${capText} has ${usdc(availableAtomic)} left${left}; ${usdc(owedAtomic)} is owed${inFlight} and ${worst}: lower max_tokens,${wait} ${remedy}`,
    details,
  };
}

interface Cap {
  kind: 'total' | 'period';
  name: string;
  atomic: bigint;
  paidAtomic: bigint;
}

function capsOf(limits: SessionLimits, paid: SessionPaid, now: number): Cap[] {
  const caps: Cap[] = [];
  if (limits.totalCapAtomic !== undefined)
    caps.push({
      kind: 'total',
      name: 'total cap',
      atomic: BigInt(limits.totalCapAtomic),
      paidAtomic: paid.paidAtomic,
    });
  if (limits.period)
    caps.push({
      kind: 'period',
      name: `cap per ${limits.period.periodSeconds}-second period`,
      atomic: BigInt(limits.period.amountAtomic),
      // What was paid in an earlier period is not counted in this one.
      paidAtomic: paid.paidPeriod === periodIndex(limits.period, now) ? paid.periodPaidAtomic : 0n,
    });
  return caps;
}
