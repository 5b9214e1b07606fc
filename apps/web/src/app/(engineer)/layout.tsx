// The engineer view's shared layout: the tab host stays mounted while the URL moves between the list
// (/workspaces) and a workspace (/p/<project>/w/<name>), so open tabs keep streaming.
import type { ReactNode } from 'react';
import { Cockpit } from '../../components/Cockpit.tsx';

export default function EngineerLayout({ children }: { children: ReactNode }) {
  return (
    <>
      <Cockpit />
      {children}
    </>
  );
}
