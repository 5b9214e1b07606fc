// Last-resort boundary: a crash in a page shows what happened and a retry, never a blank screen.
'use client';

import { Notice } from '../components/ui.tsx';

export default function PageError({ error, reset }: { error: Error & { digest?: string }; reset: () => void }) {
  return (
    <div className="centered">
      <Notice tone="error" title="This page hit a problem" actions={<button className="btn" onClick={reset}>Try again</button>}>
        <p>{error.message || 'An unexpected error occurred.'}</p>
      </Notice>
    </div>
  );
}
