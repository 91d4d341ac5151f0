import { Badge, Button, Card, FileButton, Group, Stack, Table, Text } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { useTranslation } from 'react-i18next';
import { accessToken } from '../auth.ts';
import { api, ApiError, call } from '../api/client.ts';
import { when } from '../i18n.ts';
import { DataTable, ErrorNote, Page, useLabel } from '../components/ui.tsx';

interface RunResult {
  lists?: { territory?: string; url?: string; outcome?: string; reason?: string; detail?: string }[];
  [k: string]: unknown;
}

/** Uploads a trusted list (XML) or a tar of lists as the raw body, like the CLI's air-gapped import. */
async function importFile(file: File): Promise<RunResult> {
  const type = /\.tar$/i.test(file.name) ? 'application/x-tar' : 'application/xml';
  const token = await accessToken();
  const r = await fetch('/lotl.ashx?import', {
    method: 'POST',
    headers: { 'Content-Type': type, ...(token ? { Authorization: `Bearer ${token}` } : {}) },
    body: file,
  });
  const body = (await r.json()) as RunResult & { error?: string; error_description?: string };
  if (!r.ok) throw new ApiError(r.status, body.error ?? 'error', body.error_description ?? `HTTP ${r.status}`);
  return body;
}

/** A list's last fetch or check did not succeed (a network error, a refused signature). */
function failedAttempt(a: { outcome: string } | null | undefined): boolean {
  return a?.outcome === 'failed' || a?.outcome === 'rejected';
}

export default function Trust() {
  const { t } = useTranslation();
  const label = useLabel();
  const qc = useQueryClient();
  const [result, setResult] = useState<RunResult>();
  const status = useQuery({ queryKey: ['status', 'lotl'], queryFn: () => call(api.GET('/lotl.ashx?status', { params: { query: { status: '' } } })) });
  const done = (r: unknown) => {
    setResult(r as RunResult);
    void qc.invalidateQueries({ queryKey: ['status', 'lotl'] });
  };
  const refresh = useMutation({ mutationFn: () => call(api.POST('/lotl.ashx?refresh', { params: { query: { refresh: '' } } })), onSuccess: done });
  const upload = useMutation({ mutationFn: importFile, onSuccess: done });
  const s = status.data;
  // The last run failed to fetch or refused a list: not a green "current", whatever is stored.
  const failed = (s?.lists ?? []).filter((l) => failedAttempt(l.last_attempt));
  const refreshFailed = !!s && (s.refresh_failures > 0 || failed.length > 0);
  return (
    <Page
      title={t('nav.trust')}
      actions={
        <>
          <FileButton onChange={(f) => f && upload.mutate(f)} accept=".xml,.tar,application/xml,application/x-tar">
            {(props) => (
              <Button {...props} variant="light" loading={upload.isPending} data-testid="import-lists">
                {t('trust.import')}
              </Button>
            )}
          </FileButton>
          <Button onClick={() => refresh.mutate()} loading={refresh.isPending}>
            {t('trust.refresh')}
          </Button>
        </>
      }
    >
      <ErrorNote error={status.error ?? refresh.error ?? upload.error} />
      {s && (
        <Card withBorder>
          <Group>
            <Badge color={s.state === 'current' ? 'teal' : s.state === 'stale' ? 'orange' : 'gray'} data-testid="trust-state" data-state={s.state}>
              {label('trust.states', s.state)}
            </Badge>
            {refreshFailed && (
              <Badge color="red" data-testid="trust-refresh-failed">
                {t('trust.refreshFailed')}
              </Badge>
            )}
            <Text size="sm">
              {t('trust.asOf')}: {when(s.as_of)}
            </Text>
            <Text size="sm">
              {t('trust.anchors')}: <span data-testid="anchor-count">{s.anchor_count}</span>
            </Text>
            {s.auto_refresh ? (
              <Text size="sm">
                {t('trust.nextRefresh')}: {when(s.next_refresh_at)}
              </Text>
            ) : (
              <Text size="sm" data-testid="auto-refresh-off">
                {t('trust.autoRefreshOff')}
              </Text>
            )}
          </Group>
        </Card>
      )}
      {result?.lists && (
        <Card withBorder>
          <Text fw={600}>{t('trust.lastRun')}</Text>
          <Table>
            <Table.Tbody>
              {result.lists.map((l, i) => (
                <Table.Tr key={i}>
                  <Table.Td>{l.territory ?? l.url}</Table.Td>
                  <Table.Td>{label('trust.outcomes', l.outcome)}</Table.Td>
                  <Table.Td title={l.detail} data-testid="run-reason">
                    {label('trust.reasons', l.reason)}
                  </Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Card>
      )}
      <Stack>
        <DataTable
          caption={t('trust.lists')}
          rows={s?.lists}
          loading={status.isLoading}
          rowKey={(l) => `${l.territory}|${l.kind}`}
          columns={[
            { key: 'c', label: t('trust.territory'), render: (l) => l.territory },
            { key: 'seq', label: t('trust.sequence'), render: (l) => l.sequence ?? '' },
            { key: 'next', label: t('trust.nextUpdate'), render: (l) => when(l.next_update) },
            { key: 'tsp', label: t('trust.providers'), render: (l) => l.tsp_count ?? '' },
            {
              key: 's',
              label: t('trust.state'),
              render: (l) =>
                failedAttempt(l.last_attempt) ? (
                  <Stack gap={2} align="flex-start">
                    <Badge color="red" data-testid="list-state">
                      {t('trust.failed')}
                    </Badge>
                    {/* The reason in words; the English technical detail on hover. */}
                    <Text size="xs" title={l.last_attempt?.detail ?? undefined} data-testid="list-reason">
                      {label('trust.reasons', l.last_attempt?.reason)}
                    </Text>
                  </Stack>
                ) : !l.stored ? (
                  <Badge color="gray" data-testid="list-state">
                    {t('trust.notStored')}
                  </Badge>
                ) : l.stale ? (
                  <Badge color="orange" data-testid="list-state">
                    {t('trust.stale')}
                  </Badge>
                ) : (
                  <Badge color="teal" data-testid="list-state">
                    {t('trust.ok')}
                  </Badge>
                ),
            },
          ]}
        />
      </Stack>
    </Page>
  );
}
