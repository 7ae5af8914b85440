import type { IncomingHttpHeaders } from 'node:http';
import type { Address } from 'viem';
import { type Caller, sessionOver } from '../../auth/jwt.js';
import { debtOf, owedAtomicIfKnown } from '../../billing/ledger.js';
import { formatUsdcAtomic } from '../../billing/money.js';
import { sessionStanding, settlementsOf } from '../../billing/settlements.js';
import { GatewayError } from '../../errors.js';
import type { AdmissionRequest } from '../../services/chat-contracts.js';
import type { PaymentMethod, Shortfall, Spending } from '../admission/index.js';
import { SettlementRefusedError, SettlementUnavailableError } from '../outbox/index.js';
import { sessionCapLimits, sessionCapsReader } from './session-allowance.js';
import { findSession, type SessionRecord } from './session-records.js';
import { type SessionSettlementDeps, type SettledDebt, settleSessionDebt } from './session-settlement.js';
import type { SettleOnCompletion } from './settle-on-completion.js';

/** The response headers naming the settlement a request triggered (absent when nothing was owed). */
export const SETTLEMENT_HEADERS = {
  txHash: 'x-settlement-tx',
  /** USDC atomic units. */
  amount: 'x-settlement-amount',
  id: 'x-settlement-id',
} as const;

export interface SessionMethodOptions extends SessionSettlementDeps {
  /**
   * Verifies `Authorization: Bearer <jwt>` (auth/jwt `verifiedCaller` with the app's JWT): its
   * signature and expiry only. Whether its session stands is read with the payer's debt.
   */
  authenticate(authorization: string | undefined): Caller | null;
  /** The operator's token is a bearer token too, but it pays for nothing. */
  adminToken?: string;
  /**
   * Settles a paid request's debt as soon as it is recorded: every request's with SETTLE_ON_COMPLETION,
   * otherwise those of sessions ending soon.
   */
  settleOnCompletion?: SettleOnCompletion;
  /** MIN_SETTLEMENT_USD in pico-USD: debts below it are carried (0 or absent: everything is settled first). */
  minSettlementPicoUsd?: bigint;
  /** A 402 carrying x402 requirements for what the payer owes (the x402 rail), when that rail is on. */
  demandPayment?(demand: { url: string; reason: string; amountAtomic: bigint }): Promise<GatewayError>;
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;
const RETRY_AFTER_SECONDS = '2';

/** The session-key rail: a session's access token names the payer, its delegation pays the debt. */
export function sessionPaymentMethod(options: SessionMethodOptions): PaymentMethod {
  const capsOf = sessionCapsReader(options.store);
  return {
    rail: 'session',

    recognizes(headers: IncomingHttpHeaders) {
      const token = BEARER.exec(headers.authorization ?? '')?.[1];
      return token !== undefined && token !== options.adminToken;
    },

    async identify(request: AdmissionRequest) {
      const caller = options.authenticate(request.headers.authorization);
      if (caller?.kind !== 'wallet')
        throw new GatewayError(
          'unauthorized',
          'chat requests need a session access token (POST /v1/authorize)',
          {
            headers: { 'www-authenticate': 'Bearer' },
          },
        );
      // What the session's delegation can still pay, as read by `owesNothing` or after settling.
      let spending: Spending | undefined;
      return {
        payer: caller.wallet,
        // The session, whether its payer may owe anything and what its delegation paid, read
        // together in one round trip (the session's caps once per process).
        async owesNothing() {
          const caps = await capsOf(caller.sessionId);
          if (!caps) throw await sessionEnded(options, caller.wallet);
          const standing = await sessionStanding(options.store, {
            sessionId: caller.sessionId,
            wallet: caller.wallet,
          });
          if (!standing.active) throw await sessionEnded(options, caller.wallet);
          if (standing.mayOwe) return false;
          // No debt and no settlement in flight: the totals count every settlement of the session.
          spending = { limits: sessionCapLimits(caps.limits, standing.paid), owedPicoUsd: 0n };
          return true;
        },
        recorded(cost) {
          if (cost.totalPicoUsd !== '0')
            options.settleOnCompletion?.settle(caller.wallet, {
              id: caller.sessionId,
              expiresAt: caller.sessionExpiresAt,
            });
        },
        async settleDebt() {
          // Read only when something may be owed: `owesNothing` found the session active already,
          // and sessions are never deleted, so a request owing nothing needs no second lookup.
          const session = await findSession(options.store, caller.sessionId);
          if (!session)
            throw new GatewayError('unauthorized', 'the session of this access token does not exist');
          const carried = options.minSettlementPicoUsd ? await carriedDebt(options, session) : undefined;
          if (carried) {
            spending = carried;
            return { headers: {}, moved: false };
          }
          const headers = await settleOrRefuse(options, request, session);
          spending = await spendingOf(options, session);
          return { headers, moved: Object.keys(headers).length > 0 };
        },
        async spending() {
          if (!spending) throw new Error('spending read before the debt was settled');
          return spending;
        },
        refuse: (shortfall) => refuseBeyondCap(options, request, shortfall),
      };
    },
  };
}

/**
 * What the delegation can still pay, and what the payer owes (its credit taken off, as a settlement
 * does): once its debt is settled, the requests that completed meanwhile. A request in flight when
 * this request's slot was taken that completed since is counted twice (reserved and owed): cautious.
 */
async function spendingOf(options: SessionMethodOptions, session: SessionRecord): Promise<Spending> {
  const [standing, debt] = await Promise.all([
    sessionStanding(options.store, { sessionId: session.id, wallet: session.wallet }),
    debtOf(options.store, session.wallet),
  ]);
  // The wait on the payer's lock (behind a settlement of the collector, of a completed request, of
  // another request) can outlast the session: a payer that revoked it meanwhile was told what it
  // owed, which is paid now, and nothing more is served on it.
  if (!standing.active) throw await sessionEnded(options, session.wallet);
  return { limits: sessionCapLimits(session.limits, standing.paid), owedPicoUsd: debt.owedPicoUsd };
}

/**
 * MIN_SETTLEMENT_USD: a debt below it is carried, not settled before the request (the exposure
 * budget counts it as owed, and the collector settles it once idle), unless a settlement of the
 * payer is unfinished: that one is finished first.
 */
async function carriedDebt(
  options: SessionMethodOptions,
  session: SessionRecord,
): Promise<Spending | undefined> {
  const [current, [latest]] = await Promise.all([
    spendingOf(options, session),
    settlementsOf(options.store, session.wallet, { limit: 1 }),
  ]);
  if (latest?.status === 'pending' || latest?.status === 'sent') return undefined;
  return current.owedPicoUsd < (options.minSettlementPicoUsd ?? 0n) ? current : undefined;
}

/**
 * 401 for a session revoked or expired, stating what its payer still owes when it owes something:
 * settled before anything else it asks (through another session) and collected meanwhile.
 */
async function sessionEnded(options: SessionMethodOptions, wallet: Address): Promise<GatewayError> {
  const over = sessionOver();
  const owed = await owedAtomicIfKnown(options.store, wallet);
  if (!owed) return over;
  return new GatewayError(
    'unauthorized',
    `${over.message}; ${formatUsdcAtomic(owed)} USDC is still owed and is settled first`,
    { ...over.options, details: { owedAtomic: owed.toString() } },
  );
}

/** 402 before forwarding a request its payer could not pay for (the x402 rail's terms beside). */
function refuseBeyondCap(
  options: SessionMethodOptions,
  request: AdmissionRequest,
  { reason, message, details }: Shortfall,
): Promise<GatewayError> {
  return paymentRequired(options, request, message, { reason, ...details }, BigInt(details.owedAtomic));
}

/**
 * Pays the session payer's debt: the headers naming the payment, or the GatewayError refusing the
 * request (a 503 when the chain cannot take the payment now, stating what is owed as a 402 would
 * unless a transaction sent for the debt may still pay it: the ledger counts that as owed).
 */
async function settleOrRefuse(
  options: SessionMethodOptions,
  request: AdmissionRequest,
  session: SessionRecord,
): Promise<Record<string, string>> {
  try {
    const settled = await settleSessionDebt(options, session);
    return settled ? settlementHeaders(settled) : {};
  } catch (error) {
    if (error instanceof SettlementRefusedError) throw await refusal(options, request, error);
    if (error instanceof SettlementUnavailableError) {
      const owed = error.paymentInFlight ? undefined : await owedAtomicIfKnown(options.store, session.wallet);
      throw new GatewayError('payments_unavailable', error.message, {
        headers: { 'retry-after': RETRY_AFTER_SECONDS },
        ...(owed !== undefined && { details: { owedAtomic: owed.toString() } }),
      });
    }
    throw error;
  }
}

export function settlementHeaders(settled: SettledDebt): Record<string, string> {
  return {
    [SETTLEMENT_HEADERS.txHash]: settled.txHash,
    [SETTLEMENT_HEADERS.amount]: settled.amountAtomic.toString(),
    [SETTLEMENT_HEADERS.id]: settled.settlementId,
  };
}

/** The chain refused the settlement: 402. */
function refusal(
  options: SessionMethodOptions,
  request: AdmissionRequest,
  refused: SettlementRefusedError,
): Promise<GatewayError> {
  const message = `settling the ${formatUsdcAtomic(refused.owedAtomic)} USDC owed failed: ${refused.message}`;
  const details = {
    reason: refused.reason,
    ...(refused.revert !== undefined && { revert: refused.revert }),
    owedAtomic: refused.owedAtomic.toString(),
  };
  return paymentRequired(options, request, message, details, refused.owedAtomic);
}

/** 402: the request is not forwarded; the payer may pay by x402 proof instead, or fix its session. */
async function paymentRequired(
  options: SessionMethodOptions,
  request: AdmissionRequest,
  message: string,
  details: Record<string, unknown>,
  owedAtomic: bigint,
): Promise<GatewayError> {
  const x402 = await options
    .demandPayment?.({ url: request.url, reason: message, amountAtomic: owedAtomic })
    .catch(() => undefined);
  return new GatewayError('payment_required', message, { ...x402?.options, details });
}
