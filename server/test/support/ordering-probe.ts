import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import OpenAI from 'openai';
import type { Address, Hash, PublicClient } from 'viem';
import type { Store } from '../../src/store/database.js';

/**
 * A provider endpoint in front of a simulator that checks the ordering rule as each forwarded
 * request arrives, from the ledger and the chain as they are at that moment: every request of
 * the payer that had completed before this one was sent must be paid by a settlement that is
 * confirmed, its transaction mined; and every one of them that the probe forwarded and that was
 * answered 200 with a stated cost must have its usage record, at that cost (the gateway writes the
 * record before the answer's last byte goes out, so it exists once the client has the answer: a
 * missing one is usage lost). No clocks are compared.
 */
export interface OrderingProbe {
  /** The provider base URL to configure the gateway with. */
  url: string;
  /**
   * What the gateway forwarded while something owed was unpaid, or while an earlier answered
   * request had no usage record (or one at another cost than the answer stated); empty when the
   * rule held.
   */
  violations: string[];
  /** Chat requests the provider received. */
  forwarded(): number;
  /** From now on, forwarded requests wait (checked on arrival) until `release`. */
  hold(): void;
  /** How many forwarded requests are waiting. */
  waiting(): number;
  release(): void;
  /** One chat completion of `payer` through `client`, its completion remembered for later checks. */
  chat(client: OpenAI, payer: Address, options?: { stream?: boolean }): Promise<ProbedAnswer>;
  close(): Promise<void>;
}

export interface ProbedAnswer {
  status: number;
  /** The gateway's request id (the usage record's key). */
  requestId: string | null;
  /** The error code of a refused request. */
  code?: string;
  /** The error details of a refused request (what its payer owes, say). */
  details?: Record<string, unknown>;
  /** The stated cost of an answered request, pico-USD. */
  totalPicoUsd?: bigint;
  /** A stream that began (200) and then ended in an error event: its message. */
  streamError?: string;
  headers: Headers;
}

export interface OrderingProbeOptions {
  /** The simulator the requests go on to. */
  upstreamUrl: string;
  /** A store on the gateways' database, opened by the test. */
  store: Store;
  publicClient: Pick<PublicClient, 'getTransactionReceipt'>;
}

/** A request of a payer that completed: its request id, and the cost its answer stated, if it must be recorded. */
interface Completed {
  requestId: string;
  statedPico?: bigint;
}

const MARKER = /probe:([0-9a-f-]{36})/;
export const PROBE_MODEL = 'anthropic/claude-sonnet-4.5';

export async function startOrderingProbe(options: OrderingProbeOptions): Promise<OrderingProbe> {
  const violations: string[] = [];
  /** Per payer: its completed requests. */
  const completed = new Map<Address, Completed[]>();
  /** Per marker: what had completed when that request was sent. */
  const due = new Map<string, Completed[]>();
  /** The markers of the requests that reached the provider. */
  const arrived = new Set<string>();
  const paid = new Set<string>();
  /** Answered requests whose usage record was found at the stated cost. */
  const recorded = new Set<string>();
  let forwarded = 0;
  let holding = false;
  const waiting: Array<() => void> = [];
  const release = () => {
    holding = false;
    for (const resume of waiting.splice(0)) resume();
  };

  const check = async (marker: string) => {
    const earlier = due.get(marker) ?? [];
    const owed = new Set(earlier.filter(({ requestId }) => !paid.has(requestId)).map((c) => c.requestId));
    const answered = earlier.filter(
      (c): c is Completed & { statedPico: bigint } =>
        c.statedPico !== undefined && !recorded.has(c.requestId),
    );
    if (owed.size === 0 && answered.length === 0) return;
    const rows = await options.store.db
      .selectFrom('usage_records as u')
      .leftJoin('settlements as s', 's.id', 'u.settlement_id')
      .select(['u.request_id', 'u.total_pico', 's.status', 's.tx_hash', 's.amount_atomic'])
      .where('u.request_id', 'in', [...new Set([...owed, ...answered.map((c) => c.requestId)])])
      .execute();
    const records = new Map(rows.map((row) => [row.request_id, row]));
    // No usage lost: an answer stating a cost was recorded at that cost before it went out.
    for (const { requestId, statedPico } of answered) {
      const record = records.get(requestId);
      if (!record)
        violations.push(
          `forwarded ${marker} while ${requestId}, answered at ${statedPico} pico-USD, had no usage record`,
        );
      else if (BigInt(record.total_pico) !== statedPico)
        violations.push(
          `forwarded ${marker} while ${requestId}, answered at ${statedPico} pico-USD, was recorded at ${record.total_pico}`,
        );
      else recorded.add(requestId);
    }
    for (const row of rows) {
      if (!owed.has(row.request_id)) continue;
      if (row.status !== 'confirmed') {
        violations.push(`forwarded ${marker} while ${row.request_id} was ${row.status ?? 'unclaimed'}`);
        continue;
      }
      if (row.amount_atomic !== 0n) {
        const receipt = await options.publicClient
          .getTransactionReceipt({ hash: row.tx_hash as Hash })
          .catch(() => undefined);
        if (receipt?.status !== 'success') {
          violations.push(
            `forwarded ${marker} while the payment ${row.tx_hash} of ${row.request_id} was not mined`,
          );
          continue;
        }
      }
      paid.add(row.request_id);
    }
  };

  const server = createServer(async (req, res) => {
    const body = await readBody(req);
    const marker = MARKER.exec(body)?.[1];
    if (marker) {
      forwarded++;
      arrived.add(marker);
      await check(marker).catch((error: Error) =>
        violations.push(`could not check ${marker}: ${error.message}`),
      );
      if (holding) await new Promise<void>((resolve) => waiting.push(resolve));
    }
    const controller = new AbortController();
    res.on('close', () => controller.abort());
    let upstream: Response;
    try {
      upstream = await fetch(`${options.upstreamUrl}${req.url}`, {
        method: req.method,
        headers: forwardedHeaders(req),
        body: req.method === 'GET' || req.method === 'HEAD' ? undefined : body,
        signal: controller.signal,
      });
    } catch {
      res.destroy();
      return;
    }
    res.writeHead(
      upstream.status,
      Object.fromEntries([...upstream.headers].filter(([name]) => !HOP_BY_HOP.includes(name))),
    );
    res.flushHeaders();
    if (!upstream.body) return res.end();
    // A simulator that resets the connection mid-answer: the gateway sees the same reset.
    await pipeline(Readable.fromWeb(upstream.body as never), res).catch(() => res.socket?.resetAndDestroy());
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');

  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    violations,
    forwarded: () => forwarded,
    hold() {
      holding = true;
    },
    waiting: () => waiting.length,
    release,
    async chat(client, payer, chatOptions = {}) {
      const marker = randomUUID();
      due.set(marker, [...(completed.get(payer) ?? [])]);
      const answer = await send(client, marker, chatOptions.stream === true);
      if (answer.requestId) {
        // Only an answer the provider gave and the gateway passed on with its cost must be recorded.
        const statedPico = arrived.has(marker) && answer.status === 200 ? answer.totalPicoUsd : undefined;
        completed.set(payer, [...(completed.get(payer) ?? []), { requestId: answer.requestId, statedPico }]);
      }
      return answer;
    },
    async close() {
      release();
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}

/** The exact cost an answer's usage states, in pico-USD. */
function statedPicoUsd(usage: unknown): string | undefined {
  return (usage as { cost_details?: { total_pico_usd?: string } } | null | undefined)?.cost_details
    ?.total_pico_usd;
}

async function send(client: OpenAI, marker: string, stream: boolean): Promise<ProbedAnswer> {
  const request = { model: PROBE_MODEL, messages: [{ role: 'user' as const, content: `probe:${marker}` }] };
  try {
    if (!stream) {
      const { data, response } = await client.chat.completions.create(request).withResponse();
      return answered(response, statedPicoUsd(data.usage));
    }
    const { data, response } = await client.chat.completions
      .create({ ...request, stream: true, stream_options: { include_usage: true } })
      .withResponse();
    let cost: string | undefined;
    try {
      for await (const chunk of data) cost ??= statedPicoUsd(chunk.usage);
    } catch (error) {
      return { ...answered(response, cost), streamError: (error as Error).message };
    }
    return answered(response, cost);
  } catch (error) {
    if (!(error instanceof OpenAI.APIError) || error.status === undefined) throw error;
    const headers = new Headers(error.headers as HeadersInit | undefined);
    const body = error.error as { code?: string; details?: Record<string, unknown> } | undefined;
    const code = body?.code ?? error.code ?? undefined;
    return {
      status: error.status,
      requestId: headers.get('x-request-id'),
      code: code ?? undefined,
      details: body?.details,
      headers,
    };
  }
}

function answered(response: Response, cost: string | undefined): ProbedAnswer {
  return {
    status: response.status,
    requestId: response.headers.get('x-request-id'),
    totalPicoUsd: cost === undefined ? undefined : BigInt(cost),
    headers: response.headers,
  };
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

const HOP_BY_HOP = ['host', 'connection', 'keep-alive', 'content-length', 'transfer-encoding'];

function forwardedHeaders(req: IncomingMessage): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || HOP_BY_HOP.includes(name)) continue;
    headers[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return headers;
}
