// Run in a separate process by saved-work.test.ts: tear a workspace down with the real Docker runtime and core,
// but hang once the work is saved and before the worktree is removed, so the test can SIGKILL us there.
// Prints each audit event as a JSON line, then "HANGING" there.
// Usage: node --import tsx teardown-and-hang.ts <home> <instance> <image> <slug>
import { createGrove } from '@grove/core';
import { createDockerRuntime } from '@grove/runtime';
import { createDockerDriver } from '@grove/sandbox';
import { pino } from 'pino';

const [home, instance, image, slug] = process.argv.slice(2);
if (!home || !instance || !image || !slug) throw new Error('usage: teardown-and-hang.ts <home> <instance> <image> <slug>');
const driver = createDockerDriver({ instance });
// Teardown removes the container while it saves the work, and removes the worktree after both: the removal hangs,
// and "HANGING" is printed once the work is saved too, the last moment before the worktree would go.
let saved = false;
let removing = false;
const hangNow = () => {
  if (saved && removing) process.stdout.write('HANGING\n');
};
const hanging = {
  ...driver,
  remove: () => {
    removing = true;
    hangNow();
    return new Promise<void>(() => undefined);
  },
};
const logger = pino({ level: 'silent' });
const grove = await createGrove({ home, runtime: createDockerRuntime({ driver: hanging, image, logger }), maxRunning: 8, logger });
grove.onEvent((e) => {
  process.stdout.write(`${JSON.stringify(e)}\n`);
  if (e.type === 'workspace.saved') {
    saved = true;
    hangNow();
  }
});
await grove.teardown(slug);
