import { Badge } from '@mantine/core';
import { useTranslation } from 'react-i18next';
import { callState } from '../lib/calls.ts';

/** A call's state as a coloured badge in words (the calls list, a call's page). */
export function CallStatusBadge({ status }: { status: string }) {
  const { t } = useTranslation();
  return (
    <Badge color={callState(status)?.color ?? 'gray'} data-status={status}>
      {t(`calls.status.${status}`)}
    </Badge>
  );
}
