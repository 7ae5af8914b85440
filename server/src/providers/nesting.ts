/**
 * How deep JSON a client gives may nest where it is forwarded as given (tool parameters, schemas,
 * tool call arguments): serializing it for the upstream call is recursive, and nesting deep enough
 * to overflow the stack would fail that call after the payer was admitted. No real schema or tool
 * call nests this deep.
 */
export const MAX_FORWARDED_NESTING = 64;

/** Whether `value` nests deeper than `limit` arrays/objects; iterative, so any depth is safe to check. */
export function nestingExceeds(value: unknown, limit = MAX_FORWARDED_NESTING): boolean {
  const pending: Array<[unknown, number]> = [[value, 0]];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [item, depth] = next;
    if (item === null || typeof item !== 'object') continue;
    if (depth >= limit) return true;
    for (const child of Object.values(item)) pending.push([child, depth + 1]);
  }
  return false;
}
