import { Component, type ErrorInfo, type ReactNode } from 'react';
import { Alert } from './Alert';
import { describeError } from './errors';

/**
 * The last line of defence at the app's root: an error thrown while rendering would otherwise unmount the
 * whole page and leave it white. Shows what failed and offers a reload instead.
 */
export class ErrorBoundary extends Component<{ children: ReactNode }, { error: unknown }> {
  override state: { error: unknown } = { error: undefined };

  static getDerivedStateFromError(error: unknown) {
    return { error: error ?? new Error('unknown error') };
  }

  override componentDidCatch(error: unknown, info: ErrorInfo): void {
    console.error('the dashboard failed to render', error, info.componentStack);
  }

  override render(): ReactNode {
    const { error } = this.state;
    if (error === undefined) return this.props.children;
    return (
      <main>
        <Alert tone="error" title="The dashboard stopped working">
          <p>Something on this page failed: {describeError(error)}</p>
          <p>
            Reloading usually helps. If it keeps failing, the gateway may answer in a way this dashboard does
            not understand (another version): check its logs and <code>GET /v1/authorize</code>.
          </p>
          <button type="button" onClick={() => window.location.reload()}>
            Reload the page
          </button>
        </Alert>
      </main>
    );
  }
}
