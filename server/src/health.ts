/** What /health reports of each dependency; the payments and the app name their checks with it. */

/** `warning`: up, but short of something the operator must see to soon (the relayer's ETH). */
export type DependencyStatus = 'up' | 'down' | 'unconfigured' | 'warning';

export interface DependencyState {
  status: DependencyStatus;
  detail?: string;
  /** Structured state an operator can act on (e.g. the collector's failing payers). */
  state?: Record<string, unknown>;
}

export interface DependencyCheck {
  name: string;
  /** Whether the gateway is degraded when this dependency is not up (a warning does not degrade it). */
  critical: boolean;
  /** Must be cheap: a cached state or a trivial local query, never a provider call. */
  check(): Promise<DependencyState>;
}
