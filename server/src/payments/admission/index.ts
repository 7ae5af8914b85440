export { planRequest, type Shortfall, type ShortfallReason, type SpendingLimit } from './exposure.js';
export {
  createPaymentGate,
  type DebtSettled,
  type IdentifiedPayer,
  type PaymentMethod,
  type Spending,
} from './gate.js';
export { localInFlightLimiter } from './in-flight.js';
export { redisInFlightLimiter } from './in-flight-redis.js';
export { localHourlyCounter, redisHourlyCounter, unprovenPolicy } from './unproven.js';
