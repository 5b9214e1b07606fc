// A fork's or a reopen's phases as a checklist, from the real lifecycle events.
import type { ProgressWatch } from '../lib/use-progress.ts';
import { Spinner } from './ui.tsx';
import './ForkSteps.css';

export function ForkSteps({ watch, label }: { watch: ProgressWatch; label: string }) {
  return (
    <ol className="steps" aria-label={label}>
      {watch.phases.map((p, i) => {
        const done = i < watch.reached;
        const failed = !done && watch.failed !== null && i === watch.reached;
        const active = !done && !failed && i === watch.reached && !watch.timedOut;
        const cls = done ? 'step step-done' : failed ? 'step step-failed' : active ? 'step step-active' : 'step';
        return (
          <li key={p.type} className={cls}>
            <span className="step-mark" aria-hidden="true">
              {done ? '✓' : failed ? '×' : active ? <Spinner /> : ''}
            </span>
            <span>
              {p.label}
              <span className="sr-only">{done ? ' (done)' : failed ? ' (failed)' : active ? ' (in progress)' : ' (waiting)'}</span>
            </span>
          </li>
        );
      })}
    </ol>
  );
}
