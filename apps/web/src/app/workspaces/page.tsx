// `/workspaces`: the engineer view.
import type { Metadata } from 'next';
import { WorkspacesView } from '../../components/WorkspacesView.tsx';

export const metadata: Metadata = { title: 'Workspaces · Grove' };

export default function WorkspacesPage() {
  return <WorkspacesView />;
}
