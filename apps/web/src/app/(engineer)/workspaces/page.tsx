// `/workspaces`: the engineer view with the list tab active (the layout's cockpit renders it).
import type { Metadata } from 'next';

export const metadata: Metadata = { title: 'Workspaces · Grove' };

export default function WorkspacesPage() {
  return null;
}
