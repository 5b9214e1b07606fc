// `grove up`: start Grove from this clone and print the sign-in link (the supervision is in supervise.ts).
import path from 'node:path';
import { positiveInt, type CommandSpec } from '../command.ts';
import { readHomeToken } from '../env.ts';
import { EXIT, Exit } from '../exit.ts';
import { runningPid, serverFiles } from '../server-process.ts';
import { healthy, startServer, untilExited } from '../supervise.ts';

export const up: CommandSpec<[], { setup: boolean; foreground?: boolean; timeout: number; json?: boolean }> = {
  usage: 'up',
  description: 'start Grove from this clone: setup, then the server in the background (log and pid under GROVE_HOME); prints the sign-in link',
  options: [
    { flags: '--no-setup', description: 'skip scripts/setup.sh (npm dependencies, Docker, sandbox image, dashboard build)' },
    { flags: '--foreground', description: 'keep the server attached to this terminal (Ctrl-C stops it)' },
    { flags: '--timeout <seconds>', description: 'how long to wait for the server to answer', parse: positiveInt, default: 180 },
    { flags: '--json', description: 'print { url, login, pid, log, started } as JSON' },
  ],
  help: '\nExamples:\n  grove up                 # setup, start in the background, print the sign-in link\n  grove up --foreground    # the same, attached; Ctrl-C stops it\n  GROVE_URL=http://localhost:4400 grove up --no-setup',
  async run(ctx, _args, o) {
    const { env } = ctx;
    const files = serverFiles(env.home);
    const report = (pid: number | null, started: boolean) => {
      const token = env.token ?? readHomeToken(env.home);
      const login = token ? `${env.url}/login?token=${encodeURIComponent(token)}` : null;
      if (o.json) return ctx.out(JSON.stringify({ url: env.url, login, pid, log: pid === null ? null : files.log, started }));
      ctx.out(`Grove is ${started ? 'running' : 'already running'} at ${env.url}${pid === null ? '' : ` (pid ${pid})`}`);
      ctx.out(login ? `Sign in: ${login}` : `Sign in with the token in ${path.join(env.home, 'token')} (or GROVE_TOKEN)`);
      if (pid !== null && !o.foreground) ctx.out(`Log: ${files.log}\nStop it with: grove down`);
    };
    if (await healthy(env.url)) return report(runningPid(files), false);
    const host = new URL(env.url).hostname;
    if (!['localhost', '127.0.0.1', '[::1]'].includes(host)) {
      throw new Error(`nothing answers at ${env.url}, and grove up only starts Grove on this machine (GROVE_URL names ${host})`);
    }
    const server = await startServer({ env, files, setup: o.setup, foreground: Boolean(o.foreground), timeoutSeconds: o.timeout, stderr: ctx.stderr });
    report(server.pid, true);
    if (!server.child || !o.foreground) return;
    const code = await untilExited(server.child, files);
    if (code !== 0) throw new Exit(EXIT.error, `the server exited with ${code}`);
  },
};
