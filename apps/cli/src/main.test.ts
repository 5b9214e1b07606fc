// The dispatcher and the exit codes: which command runs with what, what `--help` prints from the command table,
// and which exit code each failure ends the CLI with (scripts tell a missing configuration from a conflict).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ApiError } from './client.ts';
import type { CliCommand, CommandSpec } from './command.ts';
import { positiveInt } from './command.ts';
import { COMMANDS } from './commands/index.ts';
import type { CliIo } from './context.ts';
import { Exit } from './exit.ts';
import { EXIT, exitCodeFor, run } from './main.ts';

const home = fs.mkdtempSync(path.join(os.tmpdir(), 'grove-cli-main-'));
afterAll(() => fs.rmSync(home, { recursive: true, force: true }));

/** A terminal that is not one: what the command wrote, per stream. */
function fakeIo() {
  const written = { stdout: '', stderr: '' };
  const stream = (name: 'stdout' | 'stderr') => ({ isTTY: false, write: (s: string) => ((written[name] += s), true) }) as unknown as NodeJS.WriteStream;
  const io: CliIo = { stdin: { isTTY: false } as NodeJS.ReadStream, stdout: stream('stdout'), stderr: stream('stderr') };
  return { io, written };
}

/** Port 9 (discard) on loopback: nothing answers, so a command that reaches the API fails as unreachable. */
const environ = { ...process.env, GROVE_URL: 'http://127.0.0.1:9', GROVE_HOME: home, GROVE_TOKEN: 'test-token' };

async function grove(argv: string[], commands?: readonly CliCommand[]) {
  const { io, written } = fakeIo();
  const code = await run(argv, { io, environ, ...(commands ? { commands } : {}) });
  return { code, ...written };
}

/** Every runnable command of the table with the words that reach it: ['project', 'overlay', 'set'], ... */
function leaves(table: readonly CliCommand[], above: string[] = []): Array<{ words: string[]; spec: CommandSpec }> {
  return table.flatMap((c) => ('commands' in c ? leaves(c.commands, [...above, c.name]) : [{ words: [...above, c.usage.split(' ')[0] ?? ''], spec: c }]));
}

describe('the dispatcher', () => {
  it('runs the command named with its arguments in order and its options parsed', async () => {
    const calls: unknown[] = [];
    const echo: CommandSpec<[a: string, b: string | undefined], { n: number; flag?: boolean }> = {
      usage: 'echo <a> [b]',
      description: 'echo',
      options: [
        { flags: '-n, --number <n>', description: 'a number', parse: positiveInt, default: 1 },
        { flags: '--flag', description: 'a flag' },
      ],
      async run(ctx, args, opts) {
        calls.push([args, opts]);
        ctx.out(`env ${ctx.env.url}`);
      },
    };
    const table: CliCommand[] = [{ name: 'group', description: 'a group', commands: [echo] }];
    const r = await grove(['group', 'echo', 'x', '-n', '3', '--flag'], table);
    expect(r).toMatchObject({ code: 0, stdout: 'env http://127.0.0.1:9\n', stderr: '' });
    expect(calls).toEqual([[['x', undefined], { number: 3, flag: true }]]);
    expect((await grove(['group', 'echo', 'x', 'y'], table)).code).toBe(0);
    expect(calls.at(-1)).toEqual([['x', 'y'], { number: 1 }]);
  });

  it('ends with the code a command throws, its message on stderr; a bad argument is a usage error', async () => {
    const fail: CommandSpec<[], Record<string, never>> = {
      usage: 'fail',
      description: 'fails',
      async run() {
        throw new Exit(EXIT.conflict, 'it conflicts');
      },
    };
    expect(await grove(['fail'], [fail])).toMatchObject({ code: EXIT.conflict, stdout: '', stderr: 'grove: it conflicts\n' });
    const missing = await grove(['fork', 'demo']);
    expect(missing.code).toBe(EXIT.usage);
    expect(missing.stderr).toContain("error: missing required argument 'name'");
    const notANumber = await grove(['fork', 'demo', 'x', '--pr', 'zero']);
    expect(notANumber.code).toBe(EXIT.usage);
    expect(notANumber.stderr).toContain('must be a whole number from 1 up');
  });

  it('says an unknown command or option is unknown, shows the help and exits 2', async () => {
    const r = await grove(['nonsense']);
    expect(r.code).toBe(EXIT.usage);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain("error: unknown command 'nonsense'");
    expect(r.stderr).toContain('Usage: grove [options] [command]');
    const option = await grove(['ls', '--bogus']);
    expect(option.code).toBe(EXIT.usage);
    expect(option.stderr).toContain("error: unknown option '--bogus'");
    expect(option.stderr).toContain('Usage: grove ls [options]');
  });

  it('lists every command with its description in grove --help, and the exit codes', async () => {
    const r = await grove(['--help']);
    expect(r.code).toBe(EXIT.ok);
    for (const c of COMMANDS) {
      const [name = '', ...args] = ('commands' in c ? c.name : c.usage).split(' ');
      expect(r.stdout).toContain(`\n  ${'commands' in c ? [name] : [name, '[options]', ...args].join(' ')} `);
      expect(r.stdout.replace(/\s+/g, ' ')).toContain(c.description.replace(/\s+/g, ' ').slice(0, 40));
    }
    expect(r.stdout).toContain('Exit codes: 0 ok, 1 error, 2 usage, 3 not found');
  });

  it('prints --help of every command from its table entry: usage, options and examples', async () => {
    const all = leaves(COMMANDS);
    expect(all.map((l) => l.words.join(' '))).toEqual(expect.arrayContaining(['up', 'down', 'fork', 'resume', 'project config', 'project overlay set', 'publish']));
    for (const { words, spec } of all) {
      const r = await grove([...words, '--help']);
      const args = spec.usage.split(' ').slice(1).join(' ');
      expect(r.code, words.join(' ')).toBe(EXIT.ok);
      expect(r.stdout).toContain(`Usage: grove ${words.join(' ')} [options]${args ? ` ${args}` : ''}\n`);
      for (const o of spec.options ?? []) expect(r.stdout).toContain(o.flags);
      expect(r.stdout.trimEnd().endsWith((spec.help ?? '').trimEnd()), words.join(' ')).toBe(true);
      expect(spec.help, words.join(' ')).toMatch(/Examples?:\n {2}\S*grove /);
    }
  });

  it('names each command once on its level', () => {
    const names = (table: readonly CliCommand[]): void => {
      const own = table.map((c) => ('commands' in c ? c.name : (c.usage.split(' ')[0] ?? '')));
      expect(new Set(own).size).toBe(own.length);
      for (const c of table) if ('commands' in c) names(c.commands);
    };
    names(COMMANDS);
  });

  it('reaches the API only when a command runs: unreachable is exit 5', async () => {
    const r = await grove(['ls']);
    expect(r.code).toBe(EXIT.unreachable);
    expect(r.stderr).toContain('grove: cannot reach Grove at http://127.0.0.1:9');
  });
});

describe('exitCodeFor', () => {
  it('maps the API errors of checkpoint, publish and project add to their own codes', () => {
    expect(exitCodeFor(new ApiError(409, 'not_configured', 'no forge', { missing: 'forge' }))).toBe(EXIT.notConfigured);
    expect(exitCodeFor(new ApiError(409, 'push_rejected', 'non-fast-forward'))).toBe(EXIT.conflict);
    expect(exitCodeFor(new ApiError(409, 'project_exists', 'taken'))).toBe(EXIT.conflict);
    expect(exitCodeFor(new ApiError(409, 'invalid_state', 'nothing to publish'))).toBe(EXIT.conflict);
    expect(exitCodeFor(new ApiError(502, 'remote_failed', 'unreachable'))).toBe(EXIT.remote);
    expect(exitCodeFor(new ApiError(502, 'forge_failed', 'forge down'))).toBe(EXIT.remote);
  });

  it('keeps the codes scripts already rely on', () => {
    expect(exitCodeFor(new ApiError(0, 'unreachable', 'down'))).toBe(EXIT.unreachable);
    expect(exitCodeFor(new ApiError(404, 'workspace_not_found', 'no'))).toBe(EXIT.notFound);
    expect(exitCodeFor(new ApiError(429, 'capacity_reached', 'full'))).toBe(EXIT.capacity);
    expect(exitCodeFor(new ApiError(422, 'invalid_input', 'bad'))).toBe(EXIT.usage);
    expect(exitCodeFor(new ApiError(502, 'backend_unavailable', 'no backend'))).toBe(EXIT.error);
    expect(exitCodeFor(new Error('boom'))).toBe(EXIT.error);
    expect(new Set(Object.values(EXIT)).size).toBe(Object.values(EXIT).length);
  });
});
