// The shape of one `grove` command (its usage, options, help and what it runs) and how the table of them
// becomes the commander program that parses argv, dispatches and prints `--help`.
import { InvalidArgumentError, type Command } from 'commander';
import type { CliContext } from './context.ts';

export interface OptionSpec {
  /** As commander reads them: '--json', '-m, --message <text>', '--no-setup'. */
  flags: string;
  description: string;
  /** Turns the value given into the option's value; `previous` is the value so far (the default, or the last one). */
  parse?: (value: string, previous: never) => unknown;
  default?: unknown;
}

/** One argument as commander hands it over: a variadic last one (`<message...>`) is the list of its words. */
type Arg = string | string[] | undefined;

export interface CommandSpec<A extends readonly Arg[] = readonly Arg[], O = Record<string, unknown>> {
  /** The name and its arguments as help shows them: 'fork <project> <name>', 'resume [slug]', 'send <slug> <message...>'. */
  usage: string;
  description: string;
  options?: readonly OptionSpec[];
  /** Printed after the options by `grove <command> --help`: examples, exit codes. */
  help?: string;
  /** `args` are the arguments of `usage` in order; `opts` the options, by their camel-cased long names. */
  run(ctx: CliContext, args: A, opts: O): Promise<void>;
}

/** A command made of subcommands (`grove project add ...`): it runs nothing itself. */
export interface CommandGroup {
  name: string;
  description: string;
  commands: readonly CliCommand[];
}

export type CliCommand = CommandSpec | CommandGroup;

export function positiveInt(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('must be a whole number from 1 up');
  return n;
}

/** An option that may be given more than once; its values in order (default: none). */
export function repeatable(flags: string, description: string): OptionSpec {
  return { flags, description, parse: (v: string, all: string[]) => [...all, v], default: [] };
}

/** Adds the commands of `table` to `parent` in order, each running with `ctx`. */
export function register(parent: Command, table: readonly CliCommand[], ctx: CliContext): void {
  for (const c of table) {
    if ('commands' in c) {
      register(parent.command(c.name).description(c.description), c.commands, ctx);
      continue;
    }
    const cmd = parent.command(c.usage).description(c.description);
    for (const o of c.options ?? []) {
      if (o.parse) cmd.option(o.flags, o.description, o.parse as (value: string, previous: unknown) => unknown, o.default);
      else cmd.option(o.flags, o.description, o.default as string | boolean | string[] | undefined);
    }
    if (c.help) cmd.addHelpText('after', c.help);
    cmd.action(() => c.run(ctx, cmd.processedArgs as Arg[], cmd.opts()));
  }
}
