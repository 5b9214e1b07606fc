// Test support: searches a running sandbox for secret values (provider key, forge token, Grove token), the
// way an agent would look for them and more: every process's environment and command line (read inside as
// uid 1000 and as root, and from the host, which sees every process whoever it runs as), the process list,
// and every file but /proc, /sys and /dev (inside as uid 1000, and from the host through the container's
// root, which reads every file whatever its owner).
//
// The secrets never enter the sandbox: environments and command lines are read back and searched here, and
// grep gets its patterns on stdin (never in an argument or the environment, where the scan would plant them).
// Each scan has a positive control that must be found (a canary in the scanning process's environment and in a
// file; the sandbox's identity variable, GROVE_SLUG or a claimed warm sandbox's GROVE_POOL, in the environments read from the host), so a scan that read nothing throws instead of
// reporting "not found". Under gVisor (GROVE_TEST_RUNTIME=runsc) the sandbox's processes and files live in its own
// kernel, which the host cannot look into: there the all-seeing reads are a privileged root exec inside instead.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { TEST_RUNTIME } from '../harness.ts';

/** What every sandbox process's environment carries: its identity, set by the engine (cold start or warm sandbox). */
const IDENTITY = /GROVE_(SLUG|POOL)=/;
const IDENTITY_G = new RegExp(IDENTITY.source, 'g');

export interface SecretHit {
  secret: string;
  where: string;
}

/**
 * Runs a command and gives back its exit code and stdout (latin1). Asynchronous on purpose: a scan takes
 * seconds, and a blocked event loop would leave the harness's pooled keep-alive sockets stale.
 */
function run(cmd: string, args: string[], input?: string): Promise<{ code: number; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'ignore'] });
    const chunks: Buffer[] = [];
    child.stdout.on('data', (d: Buffer) => chunks.push(d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, out: Buffer.concat(chunks).toString('latin1') }));
    child.stdin.on('error', () => undefined);
    child.stdin.end(input ?? '');
  });
}

async function exec(args: string[], input?: string): Promise<string> {
  return (await run('docker', args, input)).out;
}

function control(ok: boolean, what: string): void {
  if (!ok) throw new Error(`secret scan is blind: ${what}`);
}

/** grep over every top-level directory of `root` but proc, sys and dev; patterns on stdin; prints each match. */
function grepScript(root: string): string {
  return [
    'set --',
    `for d in ${root}/* ${root}/.[!.]*; do case "$d" in ${root}/proc|${root}/sys|${root}/dev|'${root}/.[!.]*') ;; *) set -- "$@" "$d" ;; esac; done`,
    // -D skip: never open a FIFO or a socket (a planted FIFO would hang the scan); -r does not follow links.
    'grep -rhoasF -D skip -f - "$@"',
    'echo "== scan done"',
  ].join('\n');
}

/**
 * Every place in the sandbox `container` where one of `secrets` appears, as `{secret, where}`; empty when
 * none does. Throws when a positive control is missing (the scan would have been blind).
 */
export async function findSecretsInSandbox(container: string, secrets: Record<string, string>): Promise<SecretHit[]> {
  const canary = `grove-scan-canary-${randomBytes(8).toString('hex')}`;
  const hits: SecretHit[] = [];
  const search = (text: string, where: string): void => {
    for (const [name, value] of Object.entries(secrets)) if (text.includes(value)) hits.push({ secret: name, where });
  };

  // Environments and command lines of every process, as the agent (uid 1000) and as root inside.
  for (const user of ['1000:1000', '0:0']) {
    const out = await exec(['exec', '-u', user, '-e', `GROVE_SCAN_CANARY=${canary}`, container, 'sh', '-c', 'for p in /proc/[0-9]*; do cat "$p/environ" "$p/cmdline" 2>/dev/null; echo; done']);
    // Its own environment is the control here: which other processes a user may read depends on who runs
    // them (the host-side read below is the one that must see the backend's).
    control(out.includes(`GROVE_SCAN_CANARY=${canary}`), `the environments read as ${user} miss the scanner's own`);
    search(out, `a process environment or command line, read inside as ${user}`);
  }

  // Every process of the container from the host, and the process list with its arguments.
  const top = await exec(['top', container, '-eo', 'pid,args']);
  const pids = top
    .trim()
    .split('\n')
    .slice(1)
    .map((l) => l.trim().split(/\s+/)[0] ?? '')
    .filter((p) => /^\d+$/.test(p));
  control(pids.length > 0, 'docker top listed no process');
  search(top, 'the process list (docker top pid,args)');
  let slugs = 0;
  if (TEST_RUNTIME === 'runsc') {
    const out = await exec(['exec', '--privileged', '-u', '0:0', container, 'sh', '-c', 'for p in /proc/[0-9]*; do cat "$p/environ" "$p/cmdline" 2>/dev/null; echo; done']);
    slugs = out.match(IDENTITY_G)?.length ?? 0;
    search(out, 'a process environment or command line, read inside by a privileged root exec');
  }
  for (const pid of TEST_RUNTIME === 'runc' ? pids : []) {
    let text = '';
    for (const f of ['environ', 'cmdline']) {
      try {
        text += fs.readFileSync(`/proc/${pid}/${f}`, 'latin1');
      } catch {
        // The process ended meanwhile.
      }
    }
    if (IDENTITY.test(text)) slugs++;
    search(text, `the environment or command line of host pid ${pid}`);
  }
  control(slugs > 0, `no process environment read ${TEST_RUNTIME === 'runc' ? 'from the host' : 'by a privileged exec'} holds GROVE_SLUG or GROVE_POOL`);

  // Files: a canary file planted by the agent's user must be found by both scans.
  const plant = await run('docker', ['exec', '-u', '1000:1000', container, 'sh', '-c', 'printf "%s\\n" "$1" > /tmp/.grove-scan-canary', 'sh', canary]);
  control(plant.code === 0, 'could not plant the canary file');
  const patterns = `${[...Object.values(secrets), canary].join('\n')}\n`;
  try {
    const inside = await exec(['exec', '-i', '-u', '1000:1000', container, 'sh', '-c', grepScript('')], patterns);
    control(inside.includes('== scan done') && inside.includes(canary), 'the file scan inside (uid 1000) did not find the canary file');
    search(inside, 'a file readable by uid 1000 inside');
    const pid = (await exec(['inspect', '--format', '{{.State.Pid}}', container])).trim();
    control(/^[1-9]\d*$/.test(pid), `the container has no process (pid "${pid}")`);
    const host =
      TEST_RUNTIME === 'runc'
        ? await run('sh', ['-c', grepScript(`/proc/${pid}/root`)], patterns)
        : await run('docker', ['exec', '-i', '--privileged', '-u', '0:0', container, 'sh', '-c', grepScript('')], patterns);
    control(host.out.includes('== scan done') && host.out.includes(canary), "the file scan from the host through the container's root did not find the canary file");
    search(host.out, 'a file in the container (read from the host through its root)');
  } finally {
    await run('docker', ['exec', '-u', '1000:1000', container, 'rm', '-f', '/tmp/.grove-scan-canary']);
  }
  return hits;
}
