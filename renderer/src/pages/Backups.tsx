import { Alert, Badge, Button, Card, FileButton, Group, PasswordInput, Stack, Text, TextInput } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { useTranslation } from 'react-i18next';
import { api, call } from '../api/client.ts';
import { accessToken } from '../auth.ts';
import { when } from '../i18n.ts';
import { Dialog } from '../components/dialogs.tsx';
import { DataTable, ErrorNote, Form, OnceSecret, Page, useLabel } from '../components/ui.tsx';

const V1 = '/api.ashx/v1/backups';

/** Bytes through the session's token (a plain link would carry none): downloads and uploads of archives. */
async function authed(path: string, init: RequestInit = {}): Promise<Response> {
  const t = await accessToken();
  const headers = new Headers(init.headers);
  if (t) headers.set('Authorization', `Bearer ${t}`);
  const r = await fetch(path, { ...init, headers });
  if (!r.ok) {
    const body = (await r.json().catch(() => ({}))) as { error_description?: string };
    throw new Error(body.error_description ?? `${r.status}`);
  }
  return r;
}

async function download(name: string): Promise<void> {
  const blob = await (await authed(`${V1}/${encodeURIComponent(name)}`)).blob();
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob);
  a.download = name;
  a.click();
  URL.revokeObjectURL(a.href);
}

/** Backups (super-admin): the state, make one now, download, and restore (applied at the next start). */
export default function Backups() {
  const { t } = useTranslation();
  const label = useLabel();
  const qc = useQueryClient();
  const status = useQuery({ queryKey: ['backups', 'status'], queryFn: () => call(api.GET('/api.ashx/v1/backups/status')) });
  const list = useQuery({ queryKey: ['backups', 'list'], queryFn: () => call(api.GET('/api.ashx/v1/backups')) });
  const refresh = () => qc.invalidateQueries({ queryKey: ['backups'] });
  const [passphrase, setPassphrase] = useState('');
  const [restoring, setRestoring] = useState<string>();
  const [secret, setSecret] = useState('');
  const create = useMutation({
    mutationFn: () => call(api.POST('/api.ashx/v1/backups', { body: passphrase ? { passphrase } : {} })),
    onSuccess: () => {
      setPassphrase('');
      void refresh();
    },
  });
  const upload = useMutation({
    mutationFn: async (f: File) =>
      (await (await authed(`${V1}/upload`, { method: 'POST', headers: { 'Content-Type': 'application/octet-stream' }, body: f })).json()) as { name: string },
    onSuccess: (r) => {
      void refresh();
      setRestoring(r.name);
    },
  });
  const restore = useMutation({
    mutationFn: (name: string) => {
      // A recovery key is 13 groups of 4 letters and digits; anything else is taken as a passphrase.
      const body = /^[A-Z2-7]{4}(-[A-Z2-7]{1,4}){12}$/i.test(secret.trim()) ? { recoveryKey: secret.trim() } : { passphrase: secret };
      return call(api.POST('/api.ashx/v1/backups/{name}/restore', { params: { path: { name } }, body }));
    },
    onSuccess: () => {
      setRestoring(undefined);
      setSecret('');
      void refresh();
    },
  });
  const dl = useMutation({ mutationFn: download });
  const s = status.data;
  return (
    <Page title={t('nav.backups')}>
      <ErrorNote error={status.error ?? list.error ?? create.error ?? upload.error ?? dl.error} />
      <Card withBorder>
        <Stack gap={4}>
          <Text size="sm">
            {t('backups.health')}:{' '}
            <Badge data-testid="backup-health" color={s?.health === 'ok' ? 'green' : s?.health === 'unconfigured' ? 'gray' : 'red'}>
              {s ? t(`backups.healthStates.${s.health}`) : '…'}
            </Badge>
          </Text>
          <Text size="sm">
            {t('backups.schedule')}:{' '}
            {s?.schedule ? t('backups.every', { every: s.schedule.every, keep: s.schedule.keep, target: s.schedule.target }) : t('backups.noSchedule')}
          </Text>
          <Text size="sm">
            {t('backups.lastSuccess')}: {s?.lastSuccess ? `${when(s.lastSuccess.at)} (${s.lastSuccess.file})` : t('backups.never')}
          </Text>
          <Text size="sm" c={s?.lastFailure ? 'red' : undefined}>
            {t('backups.lastFailure')}: {s?.lastFailure ? `${when(s.lastFailure.at)}: ${s.lastFailure.reason}` : t('backups.never')}
          </Text>
          <Text size="sm">
            {t('backups.nextRun')}: {s?.nextRun ? when(s.nextRun) : '–'}
          </Text>
        </Stack>
      </Card>
      <Card withBorder>
        <Form onSubmit={() => create.mutate()} busy={create.isPending}>
          <Group align="flex-end">
            <PasswordInput
              label={t('backups.passphrase')}
              description={t('backups.passphraseHint')}
              value={passphrase}
              onChange={(e) => setPassphrase(e.currentTarget.value)}
            />
            <Button type="submit" loading={create.isPending}>
              {t('backups.create')}
            </Button>
          </Group>
        </Form>
        {create.data?.recoveryKey && <OnceSecret label={t('backups.recoveryKey')} value={create.data.recoveryKey} />}
      </Card>
      {list.data?.pendingRestore && (
        <Alert color="yellow" data-testid="restore-pending">
          {t('backups.pending')}
        </Alert>
      )}
      <Group>
        <FileButton onChange={(f) => f && upload.mutate(f)} accept=".sovbak">
          {(props) => (
            <Button variant="light" loading={upload.isPending} {...props}>
              {t('backups.upload')}
            </Button>
          )}
        </FileButton>
      </Group>
      <DataTable
        caption={t('nav.backups')}
        rows={list.data?.data}
        loading={list.isLoading}
        rowKey={(x) => x.name}
        columns={[
          { key: 'name', label: t('backups.name'), render: (x) => x.name },
          { key: 'created', label: t('backups.created'), render: (x) => when(x.created) },
          { key: 'bytes', label: t('backups.size'), render: (x) => `${(x.bytes / 2 ** 20).toFixed(1)} MiB` },
          { key: 'state', label: t('backups.state'), render: (x) => label('backups.archiveStates', x.state) },
          {
            key: 'a',
            label: t('common.actions'),
            render: (x) =>
              x.state === 'complete' && (
                <Group gap="xs">
                  <Button size="xs" variant="light" onClick={() => dl.mutate(x.name)}>
                    {t('backups.download')}
                  </Button>
                  <Button size="xs" variant="light" color="red" onClick={() => setRestoring(x.name)} data-testid="backup-restore">
                    {t('backups.restore')}
                  </Button>
                </Group>
              ),
          },
        ]}
      />
      <Dialog opened={!!restoring} onClose={() => setRestoring(undefined)} title={t('backups.restoreTitle')}>
        <Text size="sm" mb="sm">
          {t('backups.restoreWarning', { name: restoring })}
        </Text>
        <ErrorNote error={restore.error} />
        <Form onSubmit={() => restoring && restore.mutate(restoring)} busy={restore.isPending}>
          <TextInput label={t('backups.secret')} value={secret} onChange={(e) => setSecret(e.currentTarget.value)} autoComplete="off" />
          <Group justify="flex-end" mt="md">
            <Button type="submit" color="red" disabled={!secret} loading={restore.isPending}>
              {t('backups.restore')}
            </Button>
          </Group>
        </Form>
      </Dialog>
    </Page>
  );
}
