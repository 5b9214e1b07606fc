// `grove`: the command line of Grove; talks only to the registry API, with the contracts schemas. This file
// parses argv, dispatches to the command table (commands/) and prints `--help` from it.
import { Command, CommanderError } from 'commander';
import { register, type CliCommand } from './command.ts';
import { COMMANDS } from './commands/index.ts';
import { createContext, type CliIo } from './context.ts';
import { loadCliEnv } from './env.ts';
import { Exit, EXIT, exitCodeFor } from './exit.ts';

export { EXIT, exitCodeFor } from './exit.ts';

const ROOT_HELP = `\nStart here: grove up (from a clone of Grove), then grove fork <project> <name>, grove resume.\nEnvironment: GROVE_URL (default http://localhost:4300), GROVE_TOKEN (default: read from GROVE_HOME/token), GROVE_HOME (default ~/.grove).\nExit codes: 0 ok, 1 error, 2 usage, 3 not found, 4 capacity reached, 5 Grove unreachable, 6 unauthorized,\n  7 not configured (no forge, remote or GROVE_FORGE_TOKEN), 8 conflict (exists already, wrong state, push rejected),\n  9 remote or forge failed (unreachable, credentials refused), 130 cancelled.`;

const PROCESS_IO: CliIo = { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr };

export interface RunOptions {
  io?: CliIo;
  /** The environment the CLI reads its configuration from (default: this process's). */
  environ?: NodeJS.ProcessEnv;
  commands?: readonly CliCommand[];
}

export function buildProgram(o: RunOptions = {}): Command {
  const io = o.io ?? PROCESS_IO;
  const ctx = createContext(loadCliEnv(o.environ), io);
  const program = new Command('grove')
    .description('Run coding agents in parallel, each in its own sandboxed workspace.')
    .addHelpText('after', ROOT_HELP)
    .configureOutput({ writeOut: (s) => void io.stdout.write(s), writeErr: (s) => void io.stderr.write(s) })
    .exitOverride()
    .showHelpAfterError();
  register(program, o.commands ?? COMMANDS, ctx);
  return program;
}

export async function run(argv: string[], o: RunOptions = {}): Promise<number> {
  try {
    await buildProgram(o).parseAsync(argv, { from: 'user' });
    return EXIT.ok;
  } catch (e) {
    const silent = e instanceof CommanderError || (e instanceof Exit && !e.message);
    if (!silent) (o.io ?? PROCESS_IO).stderr.write(`grove: ${e instanceof Error ? e.message : String(e)}\n`);
    return exitCodeFor(e);
  }
}
