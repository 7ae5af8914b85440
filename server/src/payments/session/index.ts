export type { CollectorState } from './collector.js';
export type { SessionAuthorizer } from './session-authorization.js';
export { createSessionRail } from './session-rail.js';
