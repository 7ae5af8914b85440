import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI, { APIConnectionError, APIError } from 'openai';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type AnthropicStep, startAnthropicSimulator } from '../../devkit/simulators/index.js';
import type { Simulator } from '../../devkit/simulators/simulator-server.js';
import { authorizeOwner } from '../../devkit/stack/authorize-owner.js';
import { type LocalStack, startLocalStack } from '../../devkit/stack/local-stack.js';
import { DEFAULT_BODY_LIMIT_BYTES } from '../../src/config.js';
import { type GatewayProcess, startGatewayProcess } from '../support/gateway-process.js';

const MODEL = 'anthropic/claude-sonnet-5.5';

/** A user message holding one PNG of `base64Bytes` characters of base64, inline. */
function imageRequest(base64Bytes: number): OpenAI.ChatCompletionCreateParamsNonStreaming {
  const url = `data:image/png;base64,${'A'.repeat(base64Bytes)}`;
  return {
    model: MODEL,
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'What is in this picture?' },
          { type: 'image_url', image_url: { url } },
        ],
      },
    ],
  };
}

/** A chat request's head declaring `contentLength` bytes of body. */
const chatHead = (contentLength: number) =>
  `POST /v1/chat/completions HTTP/1.1\r\nhost: gateway\r\ncontent-type: application/json\r\ncontent-length: ${contentLength}\r\n\r\n`;

/** A keep-alive connection written by hand, read one whole response (with a content-length) at a time. */
async function rawConnection(url: string) {
  const socket = connect(Number(new URL(url).port), '127.0.0.1');
  socket.on('error', () => undefined);
  await once(socket, 'connect');
  let received = Buffer.alloc(0);
  let arrived: (() => void) | undefined;
  socket.on('data', (chunk: Buffer) => {
    received = Buffer.concat([received, chunk]);
    arrived?.();
  });
  const closed = once(socket, 'close');
  async function nextResponse() {
    for (;;) {
      const headEnd = received.indexOf('\r\n\r\n');
      if (headEnd >= 0) {
        const [statusLine = '', ...lines] = received.subarray(0, headEnd).toString('latin1').split('\r\n');
        const headers = Object.fromEntries(
          lines.map((line) => [
            line.slice(0, line.indexOf(':')).toLowerCase(),
            line.slice(line.indexOf(':') + 1).trim(),
          ]),
        );
        const end = headEnd + 4 + Number(headers['content-length']);
        if (received.length >= end) {
          const body = JSON.parse(received.subarray(headEnd + 4, end).toString('utf8'));
          received = received.subarray(end);
          return { status: Number(statusLine.split(' ')[1]), headers, body };
        }
      }
      const more = new Promise<void>((resolve) => {
        arrived = resolve;
      });
      await Promise.race([
        more,
        closed.then(() => Promise.reject(new Error('the connection closed before a whole response'))),
      ]);
    }
  }
  return {
    write: (data: string | Buffer) => socket.write(data),
    nextResponse,
    closed,
    close: () => socket.destroy(),
  };
}

/** The gateway's own count of the chat requests it answered, whatever their status (its metrics). */
async function chatRequestsAnswered(gatewayUrl: string): Promise<number> {
  const metrics = await (await fetch(`${gatewayUrl}/metrics`)).text();
  return metrics
    .split('\n')
    .filter(
      (line) =>
        line.startsWith('paygate_http_requests_total{') && line.includes('route="/v1/chat/completions"'),
    )
    .reduce((sum, line) => sum + Number(line.split(' ').at(-1)), 0);
}

describe('a body over BODY_LIMIT_BYTES, sent by the openai client to a gateway process', () => {
  const dir = mkdtempSync(join(tmpdir(), 'paygate-body-limit-'));
  let gateway: GatewayProcess;
  beforeAll(async () => {
    // BODY_LIMIT_BYTES unset: its default.
    gateway = await startGatewayProcess({
      DATABASE_URL: join(dir, 'gateway.sqlite'),
      JWT_SECRET: 'a'.repeat(32),
      CHAIN_RPC_URL: 'http://127.0.0.1:9',
      CHAIN_ID: '8453',
      TREASURY_ADDRESS: '0x00000000000000000000000000000000000000aa',
      SESSION_KEY_PRIVATE_KEY: `0x${'11'.repeat(32)}`,
    });
  });
  afterAll(async () => {
    await gateway?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('is a 413 APIError with the envelope message, asked once (no retry), not a connection error', {
    timeout: 60_000,
  }, async () => {
    const client = new OpenAI({ baseURL: `${gateway.url}/v1`, apiKey: 'not-a-token' });
    // Well past the limit, as a large picture is: the client is still sending when the 413 comes.
    const error = await client.chat.completions
      .create(imageRequest(DEFAULT_BODY_LIMIT_BYTES + 8 * 1024 * 1024))
      .catch((caught: unknown) => caught);

    expect(error).not.toBeInstanceOf(APIConnectionError);
    expect(error).toBeInstanceOf(APIError);
    expect((error as APIError).status).toBe(413);
    expect((error as APIError).message).toBe('413 the request body is larger than the gateway accepts');
    expect(await chatRequestsAnswered(gateway.url)).toBe(1);
  });

  test('keeps its connection while the rest of the body comes (up to twice the limit), then answers the next request', {
    timeout: 60_000,
  }, async () => {
    const connection = await rawConnection(gateway.url);
    try {
      const declared = DEFAULT_BODY_LIMIT_BYTES + 1024 * 1024;
      connection.write(chatHead(declared));
      const refused = await connection.nextResponse();
      expect(refused.status).toBe(413);
      expect(refused.headers.connection).not.toBe('close');
      expect(refused.body.error.code).toBe('payload_too_large');

      connection.write(Buffer.alloc(declared, 'x'));
      connection.write('GET /v1/models HTTP/1.1\r\nhost: gateway\r\n\r\n');
      const next = await connection.nextResponse();
      expect(next.status).toBe(200);
      expect(next.body.data.length).toBeGreaterThan(0);
    } finally {
      connection.close();
    }
  });

  test('is answered 413 and its connection closed at once when it declares more than twice the limit', async () => {
    const connection = await rawConnection(gateway.url);
    try {
      connection.write(chatHead(2 * DEFAULT_BODY_LIMIT_BYTES + 1));
      const refused = await connection.nextResponse();
      expect(refused.status).toBe(413);
      expect(refused.headers.connection).toBe('close');
      await connection.closed;
    } finally {
      connection.close();
    }
  });
});

describe("a 5 MB picture under BODY_LIMIT_BYTES' default", () => {
  let stack: LocalStack;
  let anthropic: Simulator<AnthropicStep>;
  beforeAll(async () => {
    anthropic = await startAnthropicSimulator();
    stack = await startLocalStack({
      port: 0,
      tempDataDir: true,
      env: { ANTHROPIC_BASE_URL: anthropic.url, ANTHROPIC_API_KEY: 'sk-ant-test' },
    });
  });
  afterAll(async () => {
    await stack?.stop();
    await anthropic?.close();
  });

  test('is answered, the picture reaching the provider whole', { timeout: 60_000 }, async () => {
    const owner = stack.testOwners[0];
    if (!owner) throw new Error('the stack has no test owner');
    const { token } = await authorizeOwner(
      {
        gatewayUrl: stack.gatewayUrl,
        rpcUrl: stack.rpcUrl,
        ownerKey: owner.privateKey,
        cap: '100',
        expiresIn: '1h',
        fund: '100',
      },
      () => undefined,
    );
    const client = new OpenAI({ baseURL: `${stack.gatewayUrl}/v1`, apiKey: token, maxRetries: 0 });
    const base64Bytes = 5 * 1024 * 1024;

    const reply = await client.chat.completions.create(imageRequest(base64Bytes));

    expect(reply.choices[0]?.message.content).toBeTruthy();
    expect(anthropic.log).toHaveLength(1);
    const image = anthropic.log[0]?.body.messages[0].content.find(
      (part: { type: string }) => part.type === 'image',
    );
    expect(image.source).toMatchObject({ type: 'base64', media_type: 'image/png' });
    expect(image.source.data).toHaveLength(base64Bytes);
  });
});
