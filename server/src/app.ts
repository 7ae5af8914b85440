import Fastify, { type FastifyInstance } from 'fastify';
import pino from 'pino';
import { type CallerChecks, installJwt, verifiedCaller, walletOfToken } from './auth/jwt.js';
import { debtOf } from './billing/ledger.js';
import { retryingRecorder } from './billing/retrying-recorder.js';
import { createUsageRecorder } from './billing/usage-recorder.js';
import { type Catalog, loadCatalog } from './catalog/catalog.js';
import {
  type ChainConfig,
  ConfigError,
  DEFAULT_DATABASE_QUERY_TIMEOUT_MS,
  defaultRequestTimeoutMs,
  type GatewayConfig,
} from './config.js';
import graphqlRoutes from './graphql/plugin.js';
import type { DependencyCheck } from './health.js';
import authorizeRoute from './http/authorize-route.js';
import { refuseEncodedBodies } from './http/body-encoding.js';
import chatRoute from './http/chat-route.js';
import { answerFrameworkError, clientErrorHandler, installErrorHandling } from './http/error-handling.js';
import { ApiError } from './http/errors.js';
import { StreamBuffers } from './http/event-stream.js';
import { coreHealthChecks, probeClient } from './http/health-checks.js';
import healthRoute from './http/health-route.js';
import { parseJsonBodies } from './http/json-body.js';
import metricsRoute from './http/metrics-route.js';
import modelsRoute from './http/models-route.js';
import { operatorAccess } from './http/operator-access.js';
import { discardOversizedBodies } from './http/oversized-body.js';
import { connectRateLimitStore, installRateLimiting } from './http/rate-limiting.js';
import { CompletionLineLog } from './http/request-log.js';
import { installWebRoute } from './http/web-route.js';
import {
  createGatewayMetrics,
  installHttpMetrics,
  meteredProviders,
  meteredRecorder,
  readLedgerSnapshot,
  relayerFunds,
} from './observability/index.js';
import {
  createPaymentGate,
  localHourlyCounter,
  localInFlightLimiter,
  redisHourlyCounter,
  redisInFlightLimiter,
  unprovenPolicy,
} from './payments/admission/index.js';
import {
  balanceReader,
  createChainClient,
  delegationEnvironment,
  storeOnceSends,
  storeSendLock,
} from './payments/chain/index.js';
import { createSessionRail } from './payments/session/index.js';
import { createX402Rail, gatewayFacilitator } from './payments/x402/index.js';
import { createProviderRegistry } from './providers/registry.js';
import type { PaymentGate, UsageRecorder } from './services/chat-contracts.js';
import { type ChatService, createChatService } from './services/chat-service.js';
import { isStoreUnavailable, openStore, pingStore, type Store } from './store/database.js';
import { migrateDatabase, migrateToLatest } from './store/migrate.js';
import { isSessionActive, revokeSession } from './store/sessions.js';
import { timeOrderedId } from './store/time-ordered-id.js';
import { GATEWAY_VERSION } from './version.js';

/** The parts the app is made of; tests replace some of them. */
export interface GatewayParts {
  catalog: Catalog;
  chat: ChatService;
  /** Who pays, before a chat request is forwarded; refuses everything until payments are wired. */
  gate: PaymentGate;
  /** Where a chat request's usage is recorded, before its answer ends. */
  recorder: UsageRecorder;
  /** What /health probes; the core's (chain RPC, providers) when not given. */
  checks: DependencyCheck[];
  /** The ledger's database; opened from DATABASE_URL, migrated, and closed with the app when not given. */
  store: Store;
}

/** How long a usage write waits out a database outage: the provider has served the request already. */
const USAGE_WRITE_RETRY_MS = 10_000;
/** An upto permit's validity beyond a request's longest run and settlement: the time to admit it. */
const UPTO_SLACK_SECONDS = 60;

/** Log lines are written in chunks of about this size, and at least every LOG_FLUSH_MS. */
const LOG_BUFFER_BYTES = 4096;
const LOG_FLUSH_MS = 200;
/** While closing, how often connections left idle by requests that ended are closed. */
const IDLE_CHECK_MS = 50;
/** Past the shutdown deadline, how long the answers of requests that ended have to go out. */
const CUT_GRACE_MS = 1_000;

/** Node's own bound on receiving a request's headers, kept when REQUEST_TIMEOUT_MS is longer. */
const NODE_HEADERS_TIMEOUT_MS = 60_000;
/** The longest Node waits between two looks for requests past their timeout (its default: 30 s). */
const MAX_TIMEOUT_CHECK_MS = 1_000;

/** A caller's own trace id, kept beside ours in logs and echoed when it is a plain token. */
const CLIENT_REQUEST_ID = /^[\w.:-]{1,128}$/;

/** How long start-up waits for the node's chain id: a first call to a remote node pays for DNS and TLS. */
const START_CHAIN_ID_TIMEOUT_MS = 3_000;

/** Builds the gateway without listening: tests call `inject()` or `listen({port: 0})`. */
export async function buildApp(
  config: GatewayConfig,
  overrides: Partial<GatewayParts> = {},
): Promise<FastifyInstance> {
  const catalog = overrides.catalog ?? loadCatalog(config.modelsFile);
  if (!catalog.find(config.defaultModel))
    throw new ConfigError('DEFAULT_MODEL', `"${config.defaultModel}" is not in the model catalog`);
  // Before anything is opened: an unknown chain without CHAIN_ENVIRONMENT_FILE stops start-up here.
  delegationEnvironment(config.chain);
  await refuseOtherChain(config.chain);
  const providers = createProviderRegistry({
    providers: config.providers,
    upstreams: catalog.upstreams,
    timeouts: {
      connectMs: config.limits.upstreamConnectTimeoutMs,
      responseMs: config.limits.upstreamTimeoutMs,
      completionMs: config.limits.upstreamCompletionTimeoutMs,
    },
    env: process.env,
  });
  const redis = config.redisUrl ? connectRateLimitStore(config.redisUrl) : undefined;
  const store =
    overrides.store ??
    openStore(config.databaseUrl, {
      queryTimeoutMs: config.limits.databaseQueryTimeoutMs ?? DEFAULT_DATABASE_QUERY_TIMEOUT_MS,
      exclusive: true,
    });
  if (overrides.store) await migrateToLatest(store);
  else
    await migrateDatabase(config.databaseUrl, store).catch(async (error: unknown) => {
      // Its lock on a SQLite file would otherwise be held until collected.
      await store.close();
      throw error;
    });
  // Every instance sharing the store sends from the same relayer key: one nonce at a time among them.
  const chain = createChainClient(config.chain, {
    sendLock: storeSendLock(store, config.chain.chainId),
    onceSends: storeOnceSends(store),
  });
  const streamBuffers = new StreamBuffers(config.limits.streamBufferBudgetBytes);
  const relayer = relayerFunds(probeClient(config.chain.rpcUrl), chain.relayer.address);
  const metrics = createGatewayMetrics({
    relayer,
    ledger: () => readLedgerSnapshot(store),
    streams: () => streamBuffers.snapshot(),
    onLedgerError: (error) => app.log.warn({ err: error }, 'metrics: the ledger could not be read'),
  });
  const callerChecks: CallerChecks = {
    adminToken: config.adminToken,
    isSessionActive: (sessionId, wallet) => isSessionActive(store, sessionId, wallet),
  };
  const x402Rail = createX402Rail({
    store,
    chain,
    facilitator: gatewayFacilitator(chain, {
      store,
      facilitatorUrl: config.chain.facilitatorUrl,
      confirmationTimeoutMs: config.limits.settlementTimeoutMs,
      batchWaitMs: config.limits.settlementBatchWaitMs,
      metrics,
    }),
    receiptTimeoutMs: config.limits.settlementTimeoutMs,
    log: {
      error: (details, message) => app.log.error(details, message),
      warn: (details, message) => app.log.warn(details, message),
    },
    metrics,
    commissionBps: config.commissionBps,
    // The longest a request runs after its admission, then the wait for its settlement's receipt.
    uptoValiditySeconds: Math.ceil(
      (config.limits.upstreamCompletionTimeoutMs + config.limits.settlementTimeoutMs) / 1000 +
        UPTO_SLACK_SECONDS,
    ),
  });
  // The rail reaches the app's JWT and logger only once requests arrive, after `app` exists below.
  const sessionRail = createSessionRail({
    demandPayment: x402Rail.demandPayment,
    metrics,
    config,
    store,
    chain,
    authenticate: (authorization) => verifiedCaller(app.jwt, authorization, callerChecks.adminToken),
    log: {
      warn: (details, message) => app.log.warn(details, message),
      error: (details, message) => app.log.error(details, message),
    },
  });
  const gate =
    overrides.gate ??
    createPaymentGate({
      methods: [sessionRail.method, x402Rail.method],
      inFlight: redis
        ? redisInFlightLimiter(redis, {
            limit: config.limits.maxInFlightPerPayer,
            slotTtlMs: config.limits.inFlightSlotTtlMs,
            onStoreError: (error) =>
              app.log.warn({ err: error }, 'in-flight store unreachable: counting this instance only'),
          })
        : localInFlightLimiter(config.limits.maxInFlightPerPayer),
      withPayerLock: store.withPayerLock,
      paymentRequired: (request) => x402Rail.paymentRequired(request),
      commissionBps: config.commissionBps,
      balances: balanceReader(chain, config.exposure.balanceMaxAgeMs),
      unproven: unprovenPolicy({
        store,
        payerMaxAtomic: config.exposure.unprovenPayerMaxAtomic,
        hourlyCeilingPicoUsd: config.exposure.unprovenHourlyMaxPicoUsd,
        counter: redis
          ? redisHourlyCounter(redis, {
              onStoreError: (error) =>
                app.log.warn(
                  { err: error },
                  'unproven exposure store unreachable: counting this instance only',
                ),
            })
          : localHourlyCounter(),
      }),
    });
  const recorder = meteredRecorder(
    overrides.recorder ??
      retryingRecorder(createUsageRecorder(store, config.commissionBps), {
        retryForMs: USAGE_WRITE_RETRY_MS,
        transient: isStoreUnavailable,
      }),
    metrics,
  );
  const parts: GatewayParts = {
    catalog,
    gate,
    recorder,
    chat:
      overrides.chat ?? createChatService({ registry: meteredProviders(providers, metrics), gate, recorder }),
    checks: overrides.checks ?? [
      ...coreHealthChecks(config, { redis, relayer }),
      storeHealthCheck(store),
      sessionRail.collector.healthCheck(),
    ],
    store,
  };

  const requestTimeoutMs =
    config.limits.requestTimeoutMs ?? defaultRequestTimeoutMs(config.limits.bodyLimitBytes);
  const app = Fastify({
    logger: {
      level: config.logLevel,
      // No redaction paths: Fastify's request serializer writes no headers (no token, no payment
      // proof reaches the log; a test checks it), and redacting costs every line a copy.
      // Written off the event loop, a few kilobytes at a time and at least every LOG_FLUSH_MS
      // (and at exit): a write per request line cost the hot path more than any query. The
      // ledger, not the log, is what must survive a crash.
      stream: pino.destination({
        dest: 1,
        sync: false,
        minLength: LOG_BUFFER_BYTES,
        periodicFlush: LOG_FLUSH_MS,
      }),
    },
    bodyLimit: config.limits.bodyLimitBytes,
    // A client that sends part of a request and stalls would hold its connection and buffered body
    // forever (Fastify's default is no limit): past the timeout it gets 408 and is disconnected.
    // Node counts it only while the request is being received, never while it is answered (a
    // stream). Node bounds the headers by the shorter of its two timeouts and the whole request by
    // the longer, so the headers' own (60 s) must not exceed it; and it looks for requests past
    // their time every `connectionsCheckingInterval` (30 s by default, as long as the timeout).
    requestTimeout: requestTimeoutMs,
    http: {
      headersTimeout: Math.min(requestTimeoutMs, NODE_HEADERS_TIMEOUT_MS),
      connectionsCheckingInterval: Math.min(MAX_TIMEOUT_CHECK_MS, Math.ceil(requestTimeoutMs / 10)),
    },
    clientErrorHandler: clientErrorHandler(timeOrderedId),
    // A path that is not valid percent-encoding is refused before routing: in the envelope too.
    frameworkErrors: answerFrameworkError,
    // Requests arriving while closing get the envelope's 503 (the hook below), not Fastify's own body.
    return503OnClosing: false,
    trustProxy: config.trustProxy,
    requestIdHeader: false,
    // The request id keys the usage record, so the gateway makes it; a client's own id would let
    // it collide with (and be billed as a retry of) an earlier request. Time-ordered (UUIDv7): new
    // usage records land at the end of the ledger's primary-key index instead of on a random page.
    genReqId: () => timeOrderedId(),
    ajv: {
      customOptions: {
        coerceTypes: false,
        removeAdditional: false,
        allErrors: false,
        verbose: true,
        allowUnionTypes: true,
      },
    },
    forceCloseConnections: 'idle',
    logController: new CompletionLineLog(),
  });
  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
    const clientId = request.headers['x-request-id'];
    if (typeof clientId === 'string' && CLIENT_REQUEST_ID.test(clientId)) {
      reply.header('x-client-request-id', clientId);
      request.log = request.log.child({ clientRequestId: clientId });
      reply.log = request.log;
    }
  });
  // Closing waits for the requests in flight, but not past SHUTDOWN_TIMEOUT_MS: then their provider
  // calls are cut, each billed as far as the provider had counted, and the requests end. Once their
  // handlers are done (each answer billed is sent first, its usage record written) and CUT_GRACE_MS
  // more, the connections still open are closed: a request still being received (Node stops
  // enforcing REQUEST_TIMEOUT_MS once the server closes), a stream its client does not read. A
  // connection left idle by its last answer is closed (checked every IDLE_CHECK_MS, once the server
  // takes no more): kept alive for a client's next request, it would hold the shutdown up. (Not by
  // answering with `connection: close`: a pipelined request behind that answer would lose its own.)
  const shutdownTimers: NodeJS.Timeout[] = [];
  let closing = false;
  const chatHandlers = new Set<Promise<unknown>>();
  const closeRemainingConnections = () =>
    app.server.getConnections((error, open) => {
      if (error || open === 0) return;
      app.log.warn({ connections: open }, 'shutdown deadline passed: closing the connections still open');
      app.server.closeAllConnections();
    });
  const cutAtDeadline = async () => {
    const calls = await providers.cut('the gateway is shutting down');
    if (calls > 0)
      app.log.warn(
        { shutdownTimeoutMs: config.limits.shutdownTimeoutMs, calls },
        'shutdown deadline passed: cut the provider calls still under way',
      );
    await Promise.allSettled([...chatHandlers]);
    shutdownTimers.push(setTimeout(closeRemainingConnections, CUT_GRACE_MS).unref());
  };
  app.addHook('preClose', async () => {
    closing = true;
    shutdownTimers.push(
      setInterval(() => {
        if (!app.server.listening) app.server.closeIdleConnections();
      }, IDLE_CHECK_MS).unref(),
      setTimeout(() => void cutAtDeadline(), config.limits.shutdownTimeoutMs).unref(),
    );
  });
  app.addHook('onClose', async () => {
    for (const timer of shutdownTimers) clearTimeout(timer);
    await providers.close();
  });
  if (!overrides.store) app.addHook('onClose', () => store.close());
  // The collector starts no round once the shutdown begins. Its round under way (which may wait
  // for receipts) and the settlements on completion of requests completing meanwhile are
  // waited for once the answers are (the chat route's own hook runs first), before the ledger
  // closes: not in preClose, whose hooks Fastify bounds by its plugin timeout.
  let collectorStopped: Promise<void> = Promise.resolve();
  app.addHook('preClose', async () => {
    collectorStopped = sessionRail.stop();
    // Awaited, and its failure reported, in the onClose hook below.
    collectorStopped.catch(() => undefined);
  });
  app.addHook('onClose', async () => {
    await collectorStopped;
    await Promise.all([sessionRail.settled(), x402Rail.settled()]);
  });
  app.addHook('onReady', async () => {
    // A failure here is retried by the collector, which finishes settlements left in flight.
    await sessionRail
      .recover()
      .catch((error: unknown) => app.log.error({ err: error }, 'settlement recovery failed'));
    // x402 settlements still pending are finished by their payer's next request.
    await x402Rail
      .recover()
      .catch((error: unknown) => app.log.error({ err: error }, 'x402 settlement recovery failed'));
    sessionRail.collector.start();
  });
  // The API speaks JSON only: anything else is 415, not a string that fails validation.
  app.removeContentTypeParser('text/plain');
  parseJsonBodies(app);
  discardOversizedBodies(app);

  installErrorHandling(app, {
    onRefusal: (route, status, reason) => {
      if (route === '/v1/chat/completions') metrics.chatRefused(status, reason);
    },
  });
  // After the error handling's hook: a path no route takes is 404 (or 405) whatever its body's encoding.
  refuseEncodedBodies(app);
  installHttpMetrics(app, metrics);
  // After the request id and the metrics' hooks, so that the refusal carries the one and is counted.
  app.addHook('onRequest', (_request, _reply, done) => {
    if (!closing) return done();
    done(
      new ApiError(503, 'service_unavailable', 'the gateway is shutting down; retry the request', {
        headers: { 'retry-after': '1' },
      }),
    );
  });
  await installJwt(app, config.jwtSecret);
  await installRateLimiting(app, {
    max: config.limits.rateLimitMax,
    windowMs: config.limits.rateLimitWindowMs,
    perRoute: config.limits.routeRateLimits,
    redis,
    identify: async (request) => walletOfToken(app.jwt, request.headers.authorization),
  });
  const operatorTokens = [config.metricsToken, config.adminToken];
  await app.register(healthRoute, {
    version: GATEWAY_VERSION,
    checks: parts.checks,
    isOperator: operatorAccess(operatorTokens),
  });
  await app.register(metricsRoute, { registry: metrics.registry, tokens: operatorTokens });
  await app.register(modelsRoute, {
    catalog,
    metadata: () => ({ authorize: sessionRail.knownTerms() ?? null }),
  });
  // Only the local stack sets DEV_FAUCET_URL: its dashboard learns there where the faucet and the chain's RPC are.
  const devChain = config.devFaucetUrl && { devFaucetUrl: config.devFaucetUrl, rpcUrl: config.chain.rpcUrl };
  await app.register(authorizeRoute, {
    authorizer: sessionRail.authorizer,
    terms: devChain ? async () => ({ ...(await sessionRail.terms()), ...devChain }) : sessionRail.terms,
    checks: callerChecks,
    revoke: (sessionId) => revokeSession(store, sessionId),
    owedAtomic: async (wallet) => (await debtOf(store, wallet)).owedAtomic,
  });
  await app.register(chatRoute, {
    catalog,
    defaultModel: config.defaultModel,
    chat: parts.chat,
    streams: {
      stallMs: config.limits.upstreamTimeoutMs,
      heartbeatMs: config.limits.streamHeartbeatMs,
      buffers: streamBuffers,
      onDisconnect: (reason) => metrics.streamDisconnected(reason),
    },
    running: chatHandlers,
  });
  await app.register(graphqlRoutes, {
    store,
    adminToken: config.adminToken,
    operator: { relayer, collector: () => sessionRail.collector.state() },
  });
  if (config.webDir) await installWebRoute(app, config.webDir);
  return app;
}

function storeHealthCheck(store: Store): DependencyCheck {
  return {
    name: 'database',
    critical: true,
    async check() {
      await pingStore(store);
      return { status: 'up', detail: store.dialect };
    },
  };
}

/**
 * A node of another chain than CHAIN_ID stops start-up: the gateway would serve requests while
 * every settlement and x402 proof, signed for CHAIN_ID, failed. A node that does not answer does
 * not (the chain may come later): /health reports it, and a mismatch once it answers.
 */
async function refuseOtherChain(chain: ChainConfig): Promise<void> {
  const nodeChainId = await probeClient(chain.rpcUrl, START_CHAIN_ID_TIMEOUT_MS)
    .getChainId()
    .catch(() => undefined);
  if (nodeChainId === undefined || nodeChainId === chain.chainId) return;
  throw new ConfigError(
    'CHAIN_ID',
    `is ${chain.chainId}, but the node at CHAIN_RPC_URL is on chain ${nodeChainId}: point CHAIN_RPC_URL at a node of chain ${chain.chainId}, or set CHAIN_ID to ${nodeChainId}`,
  );
}
