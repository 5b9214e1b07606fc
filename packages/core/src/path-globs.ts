/**
 * The allowed-paths globs of a project config (contracts/src/agent.ts). Paths are relative to the
 * worktree root with `/` separators. `*` and `?` stay within one segment, `**` spans any number of
 * segments, `[...]` is a character class. A glob also allows everything below a directory it
 * matches, so `src` and `src/` and `src/**` all allow `src/a/b.ts`.
 */
export function globToRegExp(glob: string): RegExp {
  let g = glob.replace(/\/+$/, '');
  if (g === '' || g === '**') return /^.*$/s;
  g = g.replace(/^\.\//, '');
  let out = '';
  for (let i = 0; i < g.length; i++) {
    const c = g[i] as string;
    if (c === '*') {
      if (g[i + 1] === '*') {
        const atSegmentStart = i === 0 || g[i - 1] === '/';
        const followedBySlash = g[i + 2] === '/';
        i++;
        if (atSegmentStart && followedBySlash) {
          // `**/` : zero or more whole directories
          out += '(?:[^/]*/)*';
          i++;
        } else {
          out += '.*';
        }
      } else {
        out += '[^/]*';
      }
    } else if (c === '?') {
      out += '[^/]';
    } else if (c === '[') {
      const end = g.indexOf(']', i + 2);
      if (end < 0) {
        out += '\\[';
        continue;
      }
      let body = g.slice(i + 1, end);
      const negate = body.startsWith('!') || body.startsWith('^');
      if (negate) body = body.slice(1);
      // Only the characters a class gives meaning to are escaped; a class never matches '/'.
      out += `[${negate ? '^/' : ''}${body.replace(/[\\\]]/g, '\\$&')}]`;
      i = end;
    } else {
      out += c.replace(/[.+^${}()|\\]/g, '\\$&');
    }
  }
  return new RegExp(`^${out}$`, 's');
}

export class PathPolicy {
  private readonly patterns: RegExp[];

  /** globs undefined: every path is allowed. */
  constructor(readonly globs: readonly string[] | undefined) {
    this.patterns = (globs ?? []).map(globToRegExp);
  }

  get restricted(): boolean {
    return this.globs !== undefined;
  }

  /** The path, or one of the directories it lies in, matches a glob. */
  allows(path: string): boolean {
    if (this.globs === undefined) return true;
    const segments = path.split('/');
    for (let n = segments.length; n >= 1; n--) {
      const candidate = segments.slice(0, n).join('/');
      if (this.patterns.some((p) => p.test(candidate))) return true;
    }
    return false;
  }
}
