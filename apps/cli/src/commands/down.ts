// `grove down`: stop the server `grove up` started for this GROVE_HOME.
import { positiveInt, type CommandSpec } from '../command.ts';
import { runningPid, serverFiles } from '../server-process.ts';
import { healthy, stopServer } from '../supervise.ts';

export const down: CommandSpec<[], { timeout: number; json?: boolean }> = {
  usage: 'down',
  description: 'stop the Grove server started by grove up (SIGTERM, then wait until it has shut down)',
  options: [
    { flags: '--timeout <seconds>', description: 'how long to wait for it to exit', parse: positiveInt, default: 60 },
    { flags: '--json', description: 'print { stopped, pid } as JSON' },
  ],
  help: '\nExample:\n  grove down    # sandboxes keep running; the next grove up reconnects to them',
  async run(ctx, _args, o) {
    const { env } = ctx;
    const files = serverFiles(env.home);
    const pid = runningPid(files);
    if (pid === null) {
      if (await healthy(env.url)) throw new Error(`Grove answers at ${env.url}, but no server started by grove up runs for GROVE_HOME=${env.home} (no live pid in ${files.pid}); stop it where it was started`);
      if (o.json) return ctx.out(JSON.stringify({ stopped: false, pid: null }));
      return ctx.out('Grove is not running');
    }
    if (!o.json) ctx.err(`grove: stopping Grove (pid ${pid})`);
    await stopServer({ pid, files, timeoutSeconds: o.timeout });
    if (o.json) return ctx.out(JSON.stringify({ stopped: true, pid }));
    ctx.out(`Grove stopped (pid ${pid}). Sandboxes keep running; grove up reconnects to them.`);
  },
};
