// Run in a separate process by saved-work.test.ts: tear a workspace down with the real Docker runtime and core,
// but hang right after the work was saved and before anything is removed, so the test can SIGKILL us there.
// Prints each audit event as a JSON line, then "HANGING" when the removal starts.
// Usage: node --import tsx teardown-and-hang.ts <home> <instance> <image> <slug>
import { createGrove } from '@grove/core';
import { createDockerRuntime } from '@grove/runtime';
import { createDockerDriver } from '@grove/sandbox';
import { pino } from 'pino';

const [home, instance, image, slug] = process.argv.slice(2);
if (!home || !instance || !image || !slug) throw new Error('usage: teardown-and-hang.ts <home> <instance> <image> <slug>');
const driver = createDockerDriver({ instance });
const hanging = {
  ...driver,
  // Teardown removes the container right after saving the work and before removing the worktree.
  remove: () => {
    process.stdout.write('HANGING\n');
    return new Promise<void>(() => undefined);
  },
};
const logger = pino({ level: 'silent' });
const grove = await createGrove({ home, runtime: createDockerRuntime({ driver: hanging, image, logger }), maxRunning: 8, logger });
grove.onEvent((e) => process.stdout.write(`${JSON.stringify(e)}\n`));
await grove.teardown(slug);
