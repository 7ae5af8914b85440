import type { Address as Hex } from 'viem';
import { CopyButton } from './Copy';

/** A full address (selectable, monospace) with a copy button; `label` names it for assistive tech. */
export function Address(props: { value: Hex | string; label: string; href?: string; testId?: string }) {
  const { value, label, href } = props;
  const text = (
    <code className="hex" data-testid={props.testId}>
      {value}
    </code>
  );
  return (
    <span className="address">
      {href ? (
        <a href={href} target="_blank" rel="noreferrer" aria-label={`${label} ${value}`}>
          {text}
        </a>
      ) : (
        text
      )}
      <CopyButton text={value} label={`Copy ${label}`} />
    </span>
  );
}
