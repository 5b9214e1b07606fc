// The body of the /resume page: opens the resume picker on arrival; choosing a workspace opens its tab.
'use client';

import Link from 'next/link';
import { useEffect } from 'react';
import { useResume } from './Resume.tsx';
import './ResumePage.css';

export function ResumePage() {
  const { open } = useResume();
  // Opened once on arrival; closing the picker leaves the page with a way back to it and to the list.
  useEffect(() => {
    open(null);
  }, [open]);
  return (
    <main className="resume-page">
      <h1>Resume a workspace</h1>
      <p>
        <button type="button" className="btn btn-primary" onClick={() => open(null)}>
          Choose a workspace
        </button>{' '}
        <Link className="btn" href="/workspaces">
          All workspaces
        </Link>
      </p>
    </main>
  );
}
