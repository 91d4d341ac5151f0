import { Anchor, Badge, Button, Card, Code, Group, NumberInput, Stack, Text, TextInput } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { useTranslation } from 'react-i18next';
import { api, call } from '../api/client.ts';
import { when } from '../i18n.ts';
import { useConfirm } from '../components/dialogs.tsx';
import { DownloadButton } from '../components/office.tsx';
import { DataTable, ErrorNote, fieldError, Form, OnceSecret, Page, useLabel } from '../components/ui.tsx';

export default function Certificates() {
  const { t } = useTranslation();
  const qc = useQueryClient();
  const list = useQuery({ queryKey: ['certs'], queryFn: () => call(api.GET('/rp-cert.ashx?list', { params: { query: { list: '', limit: 200 } } })) });
  const [clientId, setClientId] = useState('');
  const [days, setDays] = useState(365);
  const [key, setKey] = useState<string>();
  const [issued, setIssued] = useState<{ serial: string; certificate: string }>();
  const [ask, confirmation] = useConfirm();
  const label = useLabel();
  const issue = useMutation({
    mutationFn: () => call(api.POST('/rp-cert.ashx?issue', { params: { query: { issue: '' } }, body: { client_id: clientId, days, include_key: true } })),
    onSuccess: (r) => {
      // The certificate is public (shown and offered for download); the private key is shown once.
      setKey(r.private_key);
      setIssued({ serial: r.serial, certificate: r.certificate });
      void qc.invalidateQueries({ queryKey: ['certs'] });
      // The first certificate makes the CA; the dashboard's counts change with every one.
      void qc.invalidateQueries({ queryKey: ['status', 'ca'] });
    },
  });
  const revoke = useMutation({
    mutationFn: (serial: string) =>
      call(api.POST('/rp-cert.ashx?revoke', { params: { query: { revoke: '' } }, body: { serial, reason: 'cessationOfOperation' } })),
    onSuccess: () => Promise.all([qc.invalidateQueries({ queryKey: ['certs'] }), qc.invalidateQueries({ queryKey: ['status', 'ca'] })]),
  });
  return (
    <Page
      title={t('nav.certificates')}
      actions={
        <Group>
          <Anchor href="/rp-cert.ashx?ca">{t('certs.ca')}</Anchor>
          <Anchor href="/rp-cert.ashx?crl">{t('certs.crl')}</Anchor>
        </Group>
      }
    >
      {confirmation}
      <Card withBorder>
        <Form onSubmit={() => issue.mutate()} busy={issue.isPending}>
          <Group align="flex-end">
            <TextInput
              label="client_id"
              value={clientId}
              onChange={(e) => setClientId(e.currentTarget.value)}
              error={fieldError(issue.error, 'client_id', clientId)}
            />
            <NumberInput
              label={t('certs.days')}
              value={days}
              min={1}
              max={825}
              onChange={(v) => setDays(Number(v))}
              error={fieldError(issue.error, 'days', days)}
            />
            <Button type="submit" loading={issue.isPending} data-testid="issue-cert">
              {t('certs.issue')}
            </Button>
          </Group>
        </Form>
        {issued && (
          <Stack gap="xs" mt="sm" data-testid="issued-cert">
            <Group justify="space-between">
              <Text fw={600}>{t('office.certificate')}</Text>
              <DownloadButton path={`/rp-cert.ashx?cert&serial=${issued.serial}`} filename={`rp-cert-${issued.serial}.pem`} label={t('office.downloadCert')} />
            </Group>
            <Code block data-testid="issued-cert-pem">
              {issued.certificate}
            </Code>
          </Stack>
        )}
        {key && <OnceSecret label={t('certs.key')} value={key} />}
      </Card>
      <ErrorNote error={list.error ?? revoke.error ?? (issue.error && !(issue.error as { field?: string }).field ? issue.error : undefined)} />
      <DataTable
        caption={t('nav.certificates')}
        rows={list.data?.data}
        loading={list.isLoading}
        rowKey={(c) => c.serial}
        columns={[
          { key: 'serial', label: t('certs.serial'), render: (c) => c.serial },
          { key: 'client', label: 'client_id', render: (c) => c.client_id },
          { key: 'until', label: t('certs.notAfter'), render: (c) => when(c.not_after) },
          {
            key: 'status',
            label: t('users.status'),
            render: (c) => <Badge color={c.status === 'valid' ? 'teal' : 'gray'}>{label('certs.statuses', c.status)}</Badge>,
          },
          {
            key: 'a',
            label: t('common.actions'),
            render: (c) => (
              <Group gap="xs" wrap="nowrap">
                <DownloadButton
                  path={`/rp-cert.ashx?cert&serial=${c.serial}`}
                  filename={`rp-cert-${c.serial}.pem`}
                  label="PEM"
                  data-testid={`pem-${c.serial}`}
                />
                {c.status === 'valid' && (
                  <Button
                    size="xs"
                    variant="light"
                    color="red"
                    onClick={() =>
                      ask({
                        message: t('certs.confirmRevoke', { client: c.client_id, serial: c.serial }),
                        confirm: t('common.revoke'),
                        onConfirm: () => revoke.mutate(c.serial),
                      })
                    }
                    data-testid={`revoke-${c.serial}`}
                  >
                    {t('common.revoke')}
                  </Button>
                )}
              </Group>
            ),
          },
        ]}
      />
    </Page>
  );
}
