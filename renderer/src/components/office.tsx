import { Button, Code, Stack, Text } from '@mantine/core';
import { notifications } from '@mantine/notifications';
import { useMutation } from '@tanstack/react-query';
import { useTranslation } from 'react-i18next';
import { errorText } from '../lib/errors.ts';
import { download } from '../lib/download.ts';
import { sipCode, sipProblemKey } from '../lib/sip.ts';

/**
 * A SIP answer or trunk error in the operator's words, with the raw text below it as the detail a
 * carrier's support asks for; the raw text alone when it names nothing known.
 */
export function SipProblem({ raw }: { raw: string | null | undefined }) {
  const { t } = useTranslation();
  if (!raw) return null;
  const key = sipProblemKey(raw);
  return (
    <Stack gap={2}>
      {key && (
        <Text size="sm" data-testid="sip-problem">
          {t(key, { code: sipCode(raw) })}
        </Text>
      )}
      <Code data-testid="sip-raw" style={{ whiteSpace: 'pre-wrap', overflowWrap: 'anywhere' }}>
        {raw}
      </Code>
    </Stack>
  );
}

/** Saves an API address's answer as a file (a CSV export, a certificate); a failure is a notice. */
export function DownloadButton({
  path,
  filename,
  label,
  ...rest
}: {
  path: string;
  filename: string;
  label: string;
  'data-testid'?: string;
  'aria-label'?: string;
}) {
  const { t } = useTranslation();
  const m = useMutation({
    mutationFn: () => download(path, filename),
    onError: (e) =>
      notifications.show({
        color: 'red',
        title: t('office.exportFailed'),
        message: errorText(e),
        closeButtonProps: { 'aria-label': t('common.close') },
      }),
  });
  return (
    <Button variant="default" size="xs" onClick={() => m.mutate()} loading={m.isPending} {...rest}>
      {label}
    </Button>
  );
}
