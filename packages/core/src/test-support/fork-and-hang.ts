// Test helper run in a separate process: start a fork with the real Docker driver whose backend never answers
// on the expected socket, print each audit event as a JSON line, and hang in the health wait until killed.
// Usage: node --import tsx fork-and-hang.ts <home> <instance> <image> <project> <name> [<disk quota as JSON>]
import { createDockerDriver } from '@grove/sandbox';
import { pino } from 'pino';
import { createTestGrove } from './test-grove.ts';

const [home, instance, image, project, name, quota] = process.argv.slice(2);
if (!home || !instance || !image || !project || !name) throw new Error('usage: fork-and-hang.ts <home> <instance> <image> <project> <name>');
const grove = await createTestGrove({
  home,
  driver: createDockerDriver({ instance }),
  image,
  maxRunning: 8,
  logger: pino({ level: 'silent' }),
  healthTimeoutMs: 120_000,
  // The backend listens somewhere core does not look, so the fork waits for health until we are killed.
  sandboxEnv: { GROVE_SOCKET: '/tmp/elsewhere.sock' },
  diskQuota: quota ? (JSON.parse(quota) as { bytes: number; inodes: number }) : null,
});
grove.onEvent((e) => process.stdout.write(`${JSON.stringify(e)}\n`));
await grove.fork({ project, name });
