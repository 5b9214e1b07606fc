// The disk line of a workspace card: "Disk 1.2 / 4 GiB", a warning from 90%, "Disk full" and what to do at 100%.
'use client';

import type { DiskUsage } from '@grove/contracts';
import { diskLine } from '../lib/disk.ts';
import './CardNetwork.css';
import './CardDisk.css';

/** From the workspace list (refreshed by events, workspace.disk_full among them): no request of its own. */
export function CardDisk({ disk }: { disk: DiskUsage }) {
  const line = diskLine(disk);
  return (
    <div className={`card-disk card-disk-${line.level}`}>
      <p className="card-disk-line">
        <span className="card-net-label">Disk</span> {line.text}
      </p>
      {line.advice ? (
        <p className="card-disk-advice" role={line.level === 'full' ? 'alert' : 'status'}>
          {line.advice}
        </p>
      ) : null}
    </div>
  );
}
