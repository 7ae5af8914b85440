import { createParser, type EventSourceMessage } from 'eventsource-parser';

export type { EventSourceMessage };

/**
 * The server-sent events of a response body, as soon as their blank line arrives: in batches, those
 * each read of the body completed.
 */
export async function* serverSentEvents(
  body: AsyncIterable<Uint8Array>,
): AsyncGenerator<EventSourceMessage[]> {
  let pending: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (event) => pending.push(event) });
  const decoder = new TextDecoder();
  for await (const chunk of body) {
    parser.feed(decoder.decode(chunk, { stream: true }));
    if (pending.length === 0) continue;
    const ready = pending;
    pending = [];
    yield ready;
  }
  // A last event without its closing blank line still counts (the spec would drop it): the
  // upstream's final word, such as an error, should not be lost to sloppy framing.
  parser.feed(`${decoder.decode()}\n\n`);
  if (pending.length > 0) yield pending;
}
