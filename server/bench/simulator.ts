/**
 * The benchmark's provider: the Anthropic simulator answering at once (no scripted delays, no
 * request log), in a process of its own so that it takes no CPU time from the gateway's.
 * Prints `{"url": ...}` on stdout once listening; stops on SIGTERM.
 */
import { startAnthropicSimulator } from '../devkit/simulators/anthropic.js';

const simulator = await startAnthropicSimulator({ log: false });
process.stdout.write(`${JSON.stringify({ url: simulator.url })}\n`);
process.on('SIGTERM', () => {
  void simulator.close().then(() => process.exit(0));
});
