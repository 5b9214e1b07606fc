// Entry point of the Grove server: configuration, reconciliation, the demo project, then serve.
import crypto from 'node:crypto';
import { pino, type Logger } from 'pino';
import { createGrove } from '@grove/core';
import { createDockerRuntime } from '@grove/runtime';
import { createDockerDriver } from '@grove/sandbox';
import { loadEnv } from './env.ts';
import { loadOrCreateToken } from './auth.ts';
import { ensureDemoRepo } from './demo.ts';
import { createGroveServer, loadWeb } from './server.ts';

function reconcileWhenDockerIsBack(o: { ping(): Promise<void>; reconcile(): Promise<void>; logger: Logger }): void {
  const timer = setInterval(() => {
    o.ping()
      .then(async () => {
        clearInterval(timer);
        o.logger.info('docker.available');
        await o.reconcile();
      })
      .catch(() => undefined);
  }, 5_000);
  timer.unref();
}

async function main(): Promise<void> {
  const env = loadEnv();
  const logger = pino({ level: env.LOG_LEVEL, base: { svc: 'grove' } });
  const token = loadOrCreateToken({ home: env.GROVE_HOME, fromEnv: env.GROVE_TOKEN });
  // One Docker engine may serve several Grove homes (tests, a second checkout): scope containers to this one.
  const instance = crypto.createHash('sha256').update(env.GROVE_HOME).digest('hex').slice(0, 8);
  const driver = createDockerDriver({ instance, socketPath: env.GROVE_DOCKER_SOCKET, runtime: env.GROVE_RUNTIME });
  // Where workspaces run: a hardened container each, with its egress gate, host sockets and credential relay.
  const runtime = createDockerRuntime({
    driver,
    image: env.GROVE_IMAGE,
    logger,
    healthTimeoutMs: env.GROVE_HEALTH_TIMEOUT_MS,
    providerRelay: { upstream: env.GROVE_ANTHROPIC_UPSTREAM, apiKey: env.ANTHROPIC_API_KEY ?? null },
  });
  // Without Docker the server still starts: the API answers 503 docker_unavailable and the
  // reconciliation runs as soon as the engine answers.
  const dockerUp = await runtime.ping().then(
    () => true,
    (err: unknown) => {
      logger.error({ err }, 'docker.unavailable');
      return false;
    },
  );

  const grove = await createGrove({
    home: env.GROVE_HOME,
    databaseUrl: env.DATABASE_URL ?? null,
    runtime,
    maxRunning: env.GROVE_MAX_RUNNING,
    warmPool: env.GROVE_WARM_POOL,
    logger,
    idleStopMs: env.GROVE_IDLE_STOP,
    forgeToken: env.GROVE_FORGE_TOKEN ?? null,
    gitSshCommand: env.GROVE_GIT_SSH_COMMAND ?? null,
    watchIntervalMs: env.GROVE_WATCH_INTERVAL_MS,
    diskQuota: env.GROVE_DISK_QUOTA > 0 ? { bytes: env.GROVE_DISK_QUOTA, inodes: env.GROVE_INODE_QUOTA } : null,
  });
  if (dockerUp) await grove.reconcile();
  else reconcileWhenDockerIsBack({ ping: () => runtime.ping(), reconcile: () => grove.reconcile(), logger });
  // The project is registered before the server listens, so a client never sees it missing.
  const demoSource = env.GROVE_DEMO ? await ensureDemoRepo({ home: env.GROVE_HOME, filesDir: env.GROVE_DEMO_DIR }) : undefined;
  if (demoSource) await grove.addProject({ name: 'demo', source: demoSource, createDefault: false });

  const web = await loadWeb(env.GROVE_WEB_DIR, logger);
  const front = createGroveServer({ grove, logger, token, web, previewUrl: env.GROVE_PREVIEW_URL, backendTimeoutMs: env.GROVE_BACKEND_TIMEOUT_MS, fastLane: env.GROVE_FAST_LANE === '1' });
  const previewPort = await front.listenPreview(env.GROVE_PREVIEW_PORT, env.GROVE_HOST).catch((err: unknown) => {
    throw new Error(`the preview listener cannot listen on ${env.GROVE_HOST}:${env.GROVE_PREVIEW_PORT} (${err instanceof Error ? err.message : String(err)}); set GROVE_PREVIEW_PORT to a free port`, { cause: err });
  });
  const port = await front.listen(env.GROVE_PORT, env.GROVE_HOST);
  const shown = env.GROVE_HOST === '0.0.0.0' || env.GROVE_HOST === '127.0.0.1' ? 'localhost' : env.GROVE_HOST;
  logger.info({ port, previewPort, home: env.GROVE_HOME, cap: env.GROVE_MAX_RUNNING, registry: env.DATABASE_URL ? 'postgres' : 'sqlite' }, 'grove.listening');

  if (demoSource) {
    // The default workspace starts after the server listens, so the dashboard can show its progress.
    void grove.addProject({ name: 'demo', source: demoSource }).catch((err: unknown) => logger.error({ err }, 'demo workspace could not start'));
  }

  process.stderr.write(`\n  Grove is running: http://${shown}:${port}/login?token=${token}\n  Access token: ${token}\n\n`);

  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'grove.shutdown');
    // Sandboxes keep running; the next start reconciles with them.
    void front
      .close()
      .then(() => grove.close())
      .then(() => process.exit(0))
      .catch((err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      });
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

main().catch((err: unknown) => {
  process.stderr.write(`grove: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
