// Modal dialogs on the native <dialog>: focus is trapped, Escape closes, the page behind is inert.
'use client';

import { useEffect, useId, useRef, type ReactNode } from 'react';
import { ErrorText, Spinner } from './ui.tsx';
import './Dialog.css';

interface ModalProps {
  title: ReactNode;
  onClose: () => void;
  children: ReactNode;
}

/** Open while mounted: the parent renders it to open it and stops rendering it to close it. */
export function Modal({ title, onClose, children }: ModalProps) {
  const ref = useRef<HTMLDialogElement>(null);
  const titleId = useId();
  const onCloseRef = useRef(onClose);
  onCloseRef.current = onClose;

  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    // Still the element that opened us: the autofocus inside a closed <dialog> has not taken the focus yet.
    const opener = document.activeElement instanceof HTMLElement && document.activeElement !== document.body ? document.activeElement : null;
    if (!d.open) d.showModal();
    // Escape fires `close` on the element; hand it to the parent, which unmounts us.
    const handle = () => onCloseRef.current();
    d.addEventListener('close', handle);
    return () => {
      d.removeEventListener('close', handle);
      if (d.open) d.close();
      // Escape closes the dialog and the browser gives the focus back itself; a dialog unmounted while open (Cancel,
      // a choice) leaves it on <body>, so give it back to the opener when it is still on the page.
      const now = document.activeElement;
      if (opener?.isConnected && (now === null || now === document.body || !now.isConnected)) opener.focus();
    };
  }, []);

  return (
    <dialog ref={ref} className="dialog" aria-labelledby={titleId}>
      <div className="dialog-inner">
        <h2 id={titleId}>{title}</h2>
        {children}
      </div>
    </dialog>
  );
}

interface ConfirmProps {
  title: ReactNode;
  children: ReactNode;
  confirmLabel: string;
  busyLabel: string;
  busy: boolean;
  error: string | null;
  danger?: boolean;
  onConfirm: () => void;
  onCancel: () => void;
}

export function ConfirmDialog({ title, children, confirmLabel, busyLabel, busy, error, danger = false, onConfirm, onCancel }: ConfirmProps) {
  return (
    <Modal title={title} onClose={onCancel}>
      <div className="dialog-lead">{children}</div>
      <ErrorText message={error} className="dialog-alert" />
      <div className="dialog-actions">
        {/* Cancel first and focused: the safe choice is the default one. */}
        <button className="btn" onClick={onCancel} autoFocus disabled={busy}>
          Cancel
        </button>
        <button className={danger ? 'btn btn-danger-solid' : 'btn btn-primary'} onClick={onConfirm} disabled={busy}>
          {busy ? busyLabel : confirmLabel}
        </button>
      </div>
    </Modal>
  );
}

/**
 * The buttons at the foot of a form in a dialog: Cancel, and the form's submit button with a spinner while it runs.
 * Both are disabled while busy, so the form is neither sent twice nor closed under a request still running.
 */
export function FormActions({ label, busyLabel, busy, onCancel }: { label: string; busyLabel: string; busy: boolean; onCancel: () => void }) {
  return (
    <div className="dialog-actions">
      <button type="button" className="btn" onClick={onCancel} disabled={busy}>
        Cancel
      </button>
      <button type="submit" className="btn btn-primary" disabled={busy}>
        {busy ? <Spinner /> : null}
        {busy ? busyLabel : label}
      </button>
    </div>
  );
}
