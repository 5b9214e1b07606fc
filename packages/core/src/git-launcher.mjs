// The process launcher of git-exec.ts: a small child that starts host git for the server, so the server's large
// heap is not fork()ed for every git process (milliseconds each, on the event loop). It decides nothing: argv,
// environment, working directory and input come from git-exec.ts; limits and kills stay there (by process group).
import { spawn } from 'node:child_process';

// The server is gone (or let go of us): nothing to report to any more.
process.on('disconnect', () => process.exit(0));

process.on('message', (m) => {
  if (!m || m.t !== 'spawn') return;
  const { id } = m;
  const send = (msg) => {
    if (process.connected) process.send({ ...msg, id });
  };
  let child;
  try {
    child = spawn(m.file, m.args, { cwd: m.cwd, env: m.env, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
  } catch (e) {
    send({ t: 'error', message: e instanceof Error ? e.message : String(e) });
    return;
  }
  if (child.pid !== undefined) send({ t: 'pid', pid: child.pid });
  child.stdout.on('data', (d) => send({ t: 'out', d }));
  child.stderr.on('data', (d) => send({ t: 'err', d }));
  child.stdin.on('error', () => undefined);
  child.on('error', (e) => send({ t: 'error', message: e.message }));
  child.on('close', (code) => send({ t: 'close', code }));
  child.stdin.end(m.input ?? '');
});
