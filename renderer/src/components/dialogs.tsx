import { Button, Group, Modal, Text, type ModalProps } from '@mantine/core';
import { useState, type ReactNode } from 'react';
import { useTranslation } from 'react-i18next';

// Dialogs live apart from ui.tsx: the dashboard (the first screen) shows none, so their code loads with the first page that does.

/** A modal dialog whose close button is named (Mantine leaves it unnamed) and whose header is no second banner landmark. */
export function Dialog({ children, ...props }: ModalProps) {
  const { t } = useTranslation();
  return (
    <Modal closeButtonProps={{ 'aria-label': t('common.close') }} {...props}>
      {children}
    </Modal>
  );
}

export interface Ask {
  /** What is about to happen, naming the item ("Disable the account bob?"). */
  message: string;
  /** The confirming button's words ("Disable"). */
  confirm: string;
  onConfirm: () => void;
  color?: string;
}

/**
 * A confirmation before a step that is hard to undo: `ask({ message, confirm, onConfirm })` opens
 * a dialog naming the item; the returned element must be rendered once by the caller.
 */
export function useConfirm(): [(a: Ask) => void, ReactNode] {
  const { t } = useTranslation();
  const [ask, setAsk] = useState<Ask>();
  const close = () => setAsk(undefined);
  const dialog = (
    <Dialog opened={!!ask} onClose={close} title={t('common.confirmTitle')} data-testid="confirm-dialog">
      <Text size="sm" data-testid="confirm-message">
        {ask?.message}
      </Text>
      <Group justify="flex-end" mt="md">
        <Button variant="default" onClick={close}>
          {t('common.cancel')}
        </Button>
        <Button
          color={ask?.color ?? 'red'}
          data-autofocus
          onClick={() => {
            ask?.onConfirm();
            close();
          }}
        >
          {ask?.confirm}
        </Button>
      </Group>
    </Dialog>
  );
  return [setAsk, dialog];
}
