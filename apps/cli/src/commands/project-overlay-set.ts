// `grove project overlay set`: add or replace one overlay file, its content from --from or stdin.
import fs from 'node:fs';
import { putOverlayFileRequestSchema } from '@grove/contracts';
import type { CommandSpec } from '../command.ts';
import { checked, type CliContext } from '../context.ts';
import { EXIT, Exit } from '../exit.ts';
import { overlayTable } from '../format.ts';

/** A local file the user named (e.g. --from ./.env); a missing or unreadable one is a usage error. */
function readLocal(file: string): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new Exit(EXIT.usage, `--from ${file}: ${(e as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (e as Error).message}`);
  }
}

/** All of stdin; from a terminal that would wait for typing, so it says how to give the content instead. */
async function readStdin(ctx: CliContext): Promise<string> {
  if (ctx.stdin.isTTY) throw new Exit(EXIT.usage, 'give the content with --from <file> or on stdin (grove project overlay set <project> <path> < file)');
  const chunks: Buffer[] = [];
  for await (const chunk of ctx.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

export const overlaySet: CommandSpec<[project: string, path: string], { from?: string; json?: boolean }> = {
  usage: 'set <project> <path>',
  description: 'add or replace an overlay file (a path in the checkout, e.g. .env); its content comes from --from or stdin. Workspaces forked or reopened from now on get it',
  options: [
    { flags: '--from <file>', description: 'read the content from this local file (default: stdin)' },
    { flags: '--json', description: 'print JSON' },
  ],
  help: '\nExamples:\n  grove project overlay set app .env --from ./.env\n  grove project overlay set app .claude/settings.local.json < ~/app/.claude/settings.local.json',
  async run(ctx, [name, file], o) {
    const content = o.from === undefined ? await readStdin(ctx) : readLocal(o.from);
    const body = checked(putOverlayFileRequestSchema, { path: file, content });
    const r = await ctx.api.putOverlayFile({ params: { project: name }, body });
    if (o.json) return ctx.out(JSON.stringify(r));
    ctx.err(`${name}: ${file} set (${Buffer.byteLength(content)} B); workspaces forked or reopened from now on get it`);
    ctx.out(overlayTable(r.files, name));
  },
};
