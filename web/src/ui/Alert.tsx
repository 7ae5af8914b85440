import type { ReactNode } from 'react';

type Tone = 'error' | 'warning' | 'info' | 'success';

/** Errors interrupt (role=alert); everything else is announced politely (role=status). */
export function Alert({ tone, title, children }: { tone: Tone; title: string; children?: ReactNode }) {
  return (
    <div className={`alert alert-${tone}`} role={tone === 'error' ? 'alert' : 'status'}>
      <strong>{title}</strong>
      {children && <div className="alert-body">{children}</div>}
    </div>
  );
}

export function Loading({ what }: { what: string }) {
  return (
    <p className="loading" role="status" aria-live="polite">
      <span className="spinner" aria-hidden="true" />
      Loading {what}…
    </p>
  );
}
