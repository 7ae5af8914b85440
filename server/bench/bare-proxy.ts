/**
 * The benchmark's floor: the least a Node.js proxy does for a chat request, on the gateway's own
 * HTTP stack (Fastify in, an undici pool out) and nothing else: no credential, no ledger, no
 * translation, no log, no metrics. What the gateway spends beyond it is the cost of its features;
 * what this process reaches is about all any Node.js proxy reaches on the machine.
 * Relays POST /v1/messages to the Anthropic simulator at argv[2]; prints `{"url": ...}` once
 * listening; stops on SIGTERM.
 */
import Fastify from 'fastify';
import { Pool } from 'undici';

const upstream = new Pool(process.argv[2] as string);
const app = Fastify({ logger: false });
app.post('/v1/messages', async (request) => {
  const response = await upstream.request({
    method: 'POST',
    path: '/v1/messages',
    headers: {
      'content-type': 'application/json',
      'x-api-key': String(request.headers['x-api-key']),
      'anthropic-version': String(request.headers['anthropic-version']),
    },
    body: JSON.stringify(request.body),
  });
  return response.body.json();
});
await app.listen({ host: '127.0.0.1', port: 0 });
const address = app.server.address();
if (address === null || typeof address === 'string') throw new Error('not listening on a TCP port');
process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${address.port}` })}\n`);
process.on('SIGTERM', () => {
  void app.close().then(() => process.exit(0));
});
