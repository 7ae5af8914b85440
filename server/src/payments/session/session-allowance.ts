import type { SessionPaid } from '../../billing/settlements.js';
import type { SessionLimits } from '../../client/types.js';
import type { Store } from '../../store/database.js';
import { periodIndex } from '../../store/sessions.js';
import type { SpendingLimit } from '../admission/index.js';
import { findSession, type SessionRecord } from './session-records.js';

// A settlement is one transfer of everything owed, which the delegation's caveats refuse once it
// exceeds what they still allow: a debt beyond that can never be paid through the session. So the
// session's caps are limits of the exposure budget, as the ledger tells them (no chain read per
// request): the session's running totals of what its confirmed settlements paid (total, and in the
// current period of a per-period cap), read with its standing before every request.

/** What the caps are read from: fixed once a session is stored. */
type SessionCaps = Pick<SessionRecord, 'limits'>;

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

/**
 * The limits the session's delegation puts on what its payer can still be charged. `paid`: what the
 * session's confirmed settlements paid through it; of it, the period cap counts only what was paid
 * in the period `now` falls in.
 */
export function sessionCapLimits(
  limits: SessionLimits,
  paid: SessionPaid,
  now = Date.now(),
): SpendingLimit[] {
  const caps: SpendingLimit[] = [];
  const cap = (kind: 'total' | 'period', name: string, limitAtomic: bigint, paidAtomic: bigint) =>
    caps.push({
      kind,
      name: `the session's ${name}`,
      limitAtomic,
      availableAtomic: limitAtomic > paidAtomic ? limitAtomic - paidAtomic : 0n,
    });
  if (limits.totalCapAtomic !== undefined)
    cap('total', 'total cap', BigInt(limits.totalCapAtomic), paid.paidAtomic);
  if (limits.period)
    cap(
      'period',
      `cap per ${limits.period.periodSeconds}-second period`,
      BigInt(limits.period.amountAtomic),
      // What was paid in an earlier period is not counted in this one.
      paid.paidPeriod === periodIndex(limits.period, now) ? paid.periodPaidAtomic : 0n,
    );
  return caps;
}
