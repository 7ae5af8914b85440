import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { x402Facilitator } from '@x402/core/facilitator';
import type { SettleResponse } from '@x402/core/types';
import { toFacilitatorEvmSigner } from '@x402/evm';
import { ExactEvmScheme } from '@x402/evm/exact/facilitator';
import { type Address, type Chain, type Hex, publicActions } from 'viem';
import { createLocalWalletClient } from './chain/index.js';

export interface FacilitatorServerOptions {
  /** The chain it settles on (its RPC URL is the chain's default). */
  chain: Chain;
  /** Its own relayer key, which pays the gas of settlements. */
  privateKey: Hex;
  host?: string;
  /** Default: a free port. */
  port?: number;
}

/** A remote x402 facilitator as FACILITATOR_URL names it: GET /supported, POST /verify, POST /settle. */
export interface FacilitatorServer {
  url: string;
  /** The address its settlements are sent from. */
  address: Address;
  /** The paths it served, in order: tests see which facilitator did the work. */
  calls: string[];
  /**
   * What /settle answers, given the settlement it would make (called or not): a facilitator that
   * misreports, for tests. Unset: the settlement's own result.
   */
  answerSettle?: (settle: () => Promise<SettleResponse>) => Promise<SettleResponse>;
  /** Stops it; closing a stopped one does nothing. */
  close(): Promise<void>;
}

/**
 * x402's own facilitator (`x402Facilitator` with the `exact` EVM scheme) behind HTTP, for tests and
 * the local stack: results go back with 200 whether valid or not, as x402's reference facilitators do.
 */
export async function startFacilitatorServer(options: FacilitatorServerOptions): Promise<FacilitatorServer> {
  const wallet = createLocalWalletClient(options.chain, options.privateKey).extend(publicActions);
  const address = wallet.account.address;
  const signer = toFacilitatorEvmSigner({
    address,
    readContract: (args) => wallet.readContract(args as Parameters<typeof wallet.readContract>[0]),
    verifyTypedData: (args) => wallet.verifyTypedData(args as Parameters<typeof wallet.verifyTypedData>[0]),
    writeContract: (args) => wallet.writeContract(args as Parameters<typeof wallet.writeContract>[0]),
    sendTransaction: (args) => wallet.sendTransaction(args),
    waitForTransactionReceipt: (args) => wallet.waitForTransactionReceipt(args),
    getCode: (args) => wallet.getCode(args),
  });
  const facilitator = new x402Facilitator().register(
    `eip155:${options.chain.id}`,
    new ExactEvmScheme(signer),
  );
  const calls: string[] = [];
  const handle: FacilitatorServer = { url: '', address, calls, close: async () => {} };

  const server = createServer((request, response) => {
    calls.push(request.url ?? '');
    serve(facilitator, handle, request, response).catch((error: unknown) => {
      send(response, 500, { error: error instanceof Error ? error.message : String(error) });
    });
  });
  server.listen(options.port ?? 0, options.host ?? '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return Object.assign(handle, {
    url: `http://${options.host ?? '127.0.0.1'}:${port}`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        if (!server.listening) return resolve();
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  });
}

async function serve(
  facilitator: x402Facilitator,
  handle: Pick<FacilitatorServer, 'answerSettle'>,
  request: IncomingMessage,
  response: ServerResponse,
) {
  const path = new URL(request.url ?? '/', 'http://facilitator').pathname;
  if (request.method === 'GET' && path === '/supported')
    return send(response, 200, facilitator.getSupported());
  if (request.method !== 'POST' || (path !== '/verify' && path !== '/settle'))
    return send(response, 404, { error: `no route for ${request.method} ${path}` });
  let body: { paymentPayload?: unknown; paymentRequirements?: unknown };
  try {
    body = JSON.parse(await readBody(request));
  } catch {
    return send(response, 400, { error: 'the body is not JSON' });
  }
  const { paymentPayload, paymentRequirements } = body;
  if (
    typeof paymentPayload !== 'object' ||
    typeof paymentRequirements !== 'object' ||
    !paymentPayload ||
    !paymentRequirements
  )
    return send(response, 400, { error: 'paymentPayload and paymentRequirements are required' });
  const args = [paymentPayload, paymentRequirements] as Parameters<x402Facilitator['verify']>;
  if (path === '/verify') return send(response, 200, await facilitator.verify(...args));
  const settle = () => facilitator.settle(...args);
  const result = handle.answerSettle ? await handle.answerSettle(settle) : await settle();
  send(response, 200, result);
}

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function send(response: ServerResponse, status: number, body: unknown) {
  response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}
