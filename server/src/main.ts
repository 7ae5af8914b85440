import { buildApp } from './app.js';
import { ConfigError, loadConfig } from './config.js';

/** Reads the environment, builds, listens, and shuts down cleanly on SIGINT/SIGTERM (at once on a second one). */
async function main(): Promise<void> {
  const config = loadConfig();
  const app = await buildApp(config);
  // A library's promise rejected with no one waiting for it (x402 left one when the node failed a
  // call it no longer awaited) would end the process, and every request in flight with it.
  process.on('unhandledRejection', (reason) => {
    app.log.error({ err: reason }, 'unhandled promise rejection: logged, the gateway serves on');
  });
  let closing = false;
  const shutdown = async (signal: string) => {
    if (closing) {
      // Asked twice: the operator will not wait. As with a SIGKILL, the requests still being answered
      // go unbilled; a settlement sent is finished from the chain at the next start.
      app.log.warn({ signal }, 'second signal: exiting now, without waiting for the requests in flight');
      process.exit(1);
    }
    closing = true;
    app.log.info({ signal }, 'shutting down: finishing in-flight requests');
    try {
      await app.close();
    } catch (error) {
      // Whatever was left unfinished (a settlement sent) is finished from the chain at the next start.
      app.log.error({ err: error }, 'the shutdown did not finish cleanly');
      process.exit(1);
    }
    process.exit(0);
  };
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  await app.listen({ port: config.port, host: config.host });
}

main().catch((error: unknown) => {
  if (error instanceof ConfigError) {
    console.error(error.message);
  } else {
    console.error(error);
  }
  process.exit(1);
});
