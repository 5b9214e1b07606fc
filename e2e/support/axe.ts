// The accessibility check of the web e2e tests: axe-core, run inside the real page (Chromium), against the WCAG 2.x
// A and AA rules. A test calls it wherever a page or a dialog is on screen:
//
//   await expectAccessible(page, { context: 'the fork dialog', include: 'dialog[open]' });
//
// It fails on every `serious` or `critical` violation, listing each rule with what to fix and where; `minor` and
// `moderate` ones are returned (not thrown) so a test can look at them without the suite failing on a nit.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import type { AxeResults, Result } from 'axe-core';
import type { Page } from 'playwright-core';

const require = createRequire(import.meta.url);

/** The WCAG 2.0, 2.1 and 2.2 A and AA rules (axe's own best-practice rules are left out). */
export const WCAG_TAGS = ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa'] as const;
const FAILING: ReadonlySet<string> = new Set(['serious', 'critical']);

let source: string | undefined;
/** axe-core's browser bundle, read once per test file. */
const axeSource = (): string => (source ??= fs.readFileSync(require.resolve('axe-core'), 'utf8'));

export interface AccessibleOptions {
  /** What is being checked, for the failure message ("the workspace tab, Terminal view"). Defaults to the URL. */
  context?: string;
  /** A CSS selector to check only that part of the page (a dialog: `dialog[open]`); the whole document otherwise. */
  include?: string;
}

/** Readable lines for violations: rule id, impact, help and the selectors of every element it found. */
export function formatViolations(violations: readonly Result[]): string {
  return violations
    .map((v) => {
      const nodes = v.nodes.map((n) => `    ${n.target.join(' ')}${n.failureSummary ? `\n      ${n.failureSummary.replace(/\n\s*/g, ' ')}` : ''}`);
      return `- ${v.id} (${v.impact ?? 'unknown'}): ${v.help}\n${nodes.join('\n')}`;
    })
    .join('\n');
}

/**
 * Runs axe-core in the page and throws when anything is `serious` or `critical`; returns the lesser violations.
 * Wait for what should be on screen before calling it: axe checks the DOM as it is at that moment.
 */
export async function expectAccessible(page: Page, opts: AccessibleOptions = {}): Promise<Result[]> {
  // A check of nothing passes: a selector that matches nothing is the test's mistake, not a clean result.
  if (opts.include && (await page.locator(opts.include).count()) === 0) throw new Error(`expectAccessible: nothing matches ${opts.include} on ${page.url()}`);
  // Injected once per document; a navigation drops it and the next call injects it again. Strings, evaluated in the
  // page: the e2e tsconfig has no DOM types.
  if (!(await page.evaluate<boolean>("'axe' in window"))) await page.addScriptTag({ content: axeSource() });
  const context = opts.include ? JSON.stringify({ include: [opts.include] }) : 'document';
  const options = JSON.stringify({ runOnly: { type: 'tag', values: WCAG_TAGS }, resultTypes: ['violations'] });
  const results = await page.evaluate<AxeResults>(`window.axe.run(${context}, ${options})`);
  const failing = results.violations.filter((v) => FAILING.has(v.impact ?? ''));
  if (failing.length > 0) {
    throw new Error(`${failing.length} serious or critical accessibility violation(s) on ${opts.context ?? page.url()}:\n${formatViolations(failing)}`);
  }
  return results.violations.filter((v) => !FAILING.has(v.impact ?? ''));
}
