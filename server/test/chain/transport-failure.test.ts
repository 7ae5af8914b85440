import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createPublicClient, http, parseAbi } from 'viem';
import { afterEach, describe, expect, test } from 'vitest';
import { isTransportFailure } from '../../src/payments/chain/chain-client.js';

// Which node errors mean "retry later" (a 503) and which are an answer (a refusal), through viem's
// own error classes: a JSON-RPC endpoint answers each call as the test says.

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

/** An endpoint answering every call with `status` and the JSON-RPC `error` (or `body` as it is). */
async function rpcAnswering(status: number, answer: { error?: object; body?: string }): Promise<string> {
  const server = createServer(async (req, res) => {
    let raw = '';
    for await (const chunk of req) raw += chunk;
    res.statusCode = status;
    res.setHeader('content-type', 'application/json');
    res.end(answer.body ?? JSON.stringify({ jsonrpc: '2.0', id: JSON.parse(raw).id, error: answer.error }));
  });
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const client = (url: string) =>
  createPublicClient({ transport: http(url, { timeout: 500, retryCount: 0 }), cacheTime: 0 });

/** What each kind of call to the node throws. */
function failureOf(url: string) {
  const node = client(url);
  const contract = '0x0000000000000000000000000000000000000001';
  const calls = {
    readContract: () =>
      node.readContract({
        address: contract,
        abi: parseAbi(['function balanceOf(address) view returns (uint256)']),
        functionName: 'balanceOf',
        args: [contract],
      }),
    call: () => node.call({ to: contract, data: '0x70a08231' }),
    estimateGas: () => node.estimateGas({ account: contract, to: contract, data: '0x70a08231' }),
    request: () => node.request({ method: 'eth_call', params: [{ to: contract }, 'latest'] }),
  };
  return Object.entries(calls).map(async ([name, call]) => ({
    name,
    error: await call().then(
      () => expect.unreachable(`${name} succeeded`),
      (error: unknown) => error,
    ),
  }));
}

// "execution reverted: not enough" as a node encodes it: Error(string).
const REVERT_DATA =
  '0x08c379a0' +
  '0000000000000000000000000000000000000000000000000000000000000020' +
  '000000000000000000000000000000000000000000000000000000000000000c' +
  '6e6f7420656e6f75676800000000000000000000000000000000000000000000';

describe('isTransportFailure', () => {
  test('a call the node answered by reverting (JSON-RPC code 3) is an answer, not a failed call', async () => {
    const url = await rpcAnswering(200, {
      error: { code: 3, message: 'execution reverted: not enough', data: REVERT_DATA },
    });
    for (const failure of failureOf(url)) {
      const { name, error } = await failure;
      expect({ name, transport: isTransportFailure(error) }).toEqual({ name, transport: false });
    }
  });

  test.each([
    ['HTTP 429', 429, { body: 'rate limited' }],
    ['HTTP 503', 503, { body: 'unavailable' }],
    ['HTTP 429 with a JSON-RPC error', 429, { error: { code: -32005, message: 'limit exceeded' } }],
    ['an internal error of the node', 200, { error: { code: -32603, message: 'internal error' } }],
  ])('%s from the RPC is a transport failure', async (_name, status, answer) => {
    const url = await rpcAnswering(status, answer);
    for (const failure of failureOf(url)) {
      const { name, error } = await failure;
      expect({ name, transport: isTransportFailure(error) }).toEqual({ name, transport: true });
    }
  });

  test('a refused connection and a node that does not answer in time are transport failures', async () => {
    const silent = createServer(() => {});
    servers.push(silent);
    silent.listen(0, '127.0.0.1');
    await once(silent, 'listening');
    for (const url of ['http://127.0.0.1:9', `http://127.0.0.1:${(silent.address() as AddressInfo).port}`])
      for (const failure of failureOf(url)) {
        const { name, error } = await failure;
        expect({ url, name, transport: isTransportFailure(error) }).toEqual({ url, name, transport: true });
      }
  });

  test('anything that is not viem’s is not a transport failure', () => {
    expect(isTransportFailure(new Error('boom'))).toBe(false);
    expect(isTransportFailure(undefined)).toBe(false);
  });
});
