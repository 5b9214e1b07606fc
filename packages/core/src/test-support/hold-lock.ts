// Test helper run in a separate process: take a RepoLock with the production code, say so, hold it, release.
// Usage: node --import tsx hold-lock.ts <lock dir> <key> <hold ms>
import { RepoLock } from '../lock.ts';

const [dir, key, holdMs] = process.argv.slice(2);
if (!dir || !key || !holdMs) throw new Error('usage: hold-lock.ts <dir> <key> <holdMs>');
const lock = new RepoLock({ dir, timeoutMs: 10_000 });
await lock.withLock(key, async () => {
  process.stdout.write(`locked ${Date.now()}\n`);
  await new Promise((r) => setTimeout(r, Number(holdMs)));
  process.stdout.write(`releasing ${Date.now()}\n`);
});
