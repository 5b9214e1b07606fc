// Entry point inside the sandbox: read the environment, serve on the socket, shut down cleanly on SIGTERM/SIGINT.
import { createBackend } from './backend.ts';
import { createEgressRelay } from './egress-relay.ts';
import { agentEnv, readClaimedEnv, readEnv, readPoolEnv } from './env.ts';
import { READ_FILES_ARG, readFilesMain } from './files.ts';
import { createLogger } from './logger.ts';
import { waitForClaim } from './pool-wait.ts';
import { WRITE_FILE_ARG, writeWorkspaceFileMain } from './providers/workspace-files.ts';

/** docker stop waits 10 s before SIGKILL; give up a little earlier so the exit is ours. */
const FORCE_EXIT_MS = 8000;

async function main(): Promise<void> {
  const logger = createLogger({ bindings: { component: 'grove-backend' } });
  process.on('uncaughtException', (err) => {
    logger.fatal({ err }, 'uncaught exception');
    process.exit(1);
  });
  process.on('unhandledRejection', (err) => {
    logger.fatal({ err }, 'unhandled rejection');
    process.exit(1);
  });

  let env;
  try {
    // A warm sandbox (the host's pool) serves nothing but its claim until a fork gives it a slug.
    const pool = readPoolEnv();
    const slug = pool ? await waitForClaim({ ...pool, logger }) : null;
    env = slug ? readClaimedEnv(slug) : readEnv();
  } catch (err) {
    logger.fatal({ err }, err instanceof Error ? err.message : 'invalid environment');
    process.exit(2);
  }

  const backend = createBackend({ ...env, agentEnv: agentEnv(), relayUrl: `http://127.0.0.1:${env.providerRelayPort}`, logger });
  // The credential relay: agents send provider API calls in plain HTTP to this loopback port, the host
  // side (provider.sock) adds the key. The same byte pipe as the egress relay, to another socket.
  const providerRelay = createEgressRelay({ socketPath: env.providerRelaySocket, port: env.providerRelayPort, logger });
  const relay = createEgressRelay({ socketPath: env.egressSocket, port: env.egressPort, logger });
  let stopping = false;
  const shutdown = (signal: NodeJS.Signals) => {
    if (stopping) {
      logger.warn({ signal }, 'second signal during shutdown; exiting now');
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal }, 'shutting down');
    setTimeout(() => {
      logger.error({ afterMs: FORCE_EXIT_MS }, 'shutdown took too long; exiting');
      process.exit(1);
    }, FORCE_EXIT_MS).unref();
    Promise.all([backend.close(), relay.close(), providerRelay.close()]).then(
      () => process.exit(0),
      (err: unknown) => {
        logger.fatal({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);

  // The relay first, so a backend that answers /health already has its way out. Without the relay the
  // sandbox simply has no egress while the thread still works, so that is logged loudly, not fatal.
  await relay.listen().catch((err: unknown) => logger.error({ err }, 'egress relay failed to listen; this sandbox has no egress'));
  await providerRelay.listen().catch((err: unknown) => logger.error({ err }, 'provider relay failed to listen; agents cannot reach their API'));
  try {
    await backend.listen();
  } catch (err) {
    logger.fatal({ err }, 'backend failed to start');
    process.exit(1);
  }
}

if (process.argv[2] === WRITE_FILE_ARG) {
  // A child started as the agent's user by writeWorkspaceFileAs: one write, one JSON line, exit.
  void writeWorkspaceFileMain(process.argv.slice(3), process.stdin).then((line) => process.stdout.write(`${line}\n`));
} else if (process.argv[2] === READ_FILES_ARG) {
  // A child started as the agent's user by createFilesReader: one listing or read, one JSON line, exit.
  void readFilesMain(process.argv.slice(3)).then((line) => process.stdout.write(`${line}\n`));
} else {
  void main();
}
