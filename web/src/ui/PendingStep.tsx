import type { ReactNode } from 'react';

/** A step's card before it can act: its heading, and what it waits for. */
export function PendingStep({
  id,
  title,
  wide = false,
  children,
}: {
  /** The heading's id, which labels the card. */
  id: string;
  title: string;
  wide?: boolean;
  children: ReactNode;
}) {
  return (
    <section className={wide ? 'card wide' : 'card'} aria-labelledby={id}>
      <h2 id={id}>{title}</h2>
      <p className="muted">{children}</p>
    </section>
  );
}
