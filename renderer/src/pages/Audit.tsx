import { Group, TextInput } from '@mantine/core';
import { useDebouncedValue } from '@mantine/hooks';
import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { useTranslation } from 'react-i18next';
import { api, call } from '../api/client.ts';
import { dayStart, when } from '../i18n.ts';
import { DataTable, ErrorNote, Page, useLabel } from '../components/ui.tsx';
import { DownloadButton } from '../components/office.tsx';
import { withQuery } from '../lib/download.ts';

const PAGE = 100;

export default function Audit() {
  const { t } = useTranslation();
  const label = useLabel();
  const [event, setEvent] = useState('');
  const [user, setUser] = useState('');
  const [since, setSince] = useState('');
  const [page, setPage] = useState(1);
  const [filters] = useDebouncedValue({ event, user, since }, 300);
  const filter = {
    ...(filters.event ? { event: filters.event } : {}),
    ...(filters.user ? { user: filters.user } : {}),
    ...(filters.since ? { since: dayStart(filters.since) } : {}),
  };
  const query = { limit: PAGE, offset: (page - 1) * PAGE, ...filter };
  const list = useQuery({
    queryKey: ['audit', query],
    queryFn: () => call(api.GET('/api.ashx/v1/auditlog', { params: { query } })),
    placeholderData: (p) => p,
  });
  return (
    <Page
      title={t('nav.audit')}
      actions={
        <DownloadButton path={withQuery('/api.ashx/v1/auditlog/export', filter)} filename="audit.csv" label={t('office.exportCsv')} data-testid="export-csv" />
      }
    >
      <Group align="flex-end">
        <TextInput
          label={t('audit.event')}
          value={event}
          onChange={(e) => {
            setEvent(e.currentTarget.value);
            setPage(1);
          }}
        />
        <TextInput
          label={t('audit.user')}
          value={user}
          onChange={(e) => {
            setUser(e.currentTarget.value);
            setPage(1);
          }}
        />
        <TextInput
          label={t('common.since')}
          type="date"
          value={since}
          onChange={(e) => {
            setSince(e.currentTarget.value);
            setPage(1);
          }}
        />
      </Group>
      <ErrorNote error={list.error} />
      <DataTable
        caption={t('nav.audit')}
        rows={list.data?.data}
        loading={list.isLoading}
        total={list.data?.total}
        page={page}
        pageSize={PAGE}
        onPage={setPage}
        rowKey={(r) => `${r.ts}|${r.event}|${r.extra}`}
        columns={[
          { key: 'ts', label: t('audit.when'), render: (r) => when(r.ts) },
          { key: 'event', label: t('audit.event'), render: (r) => <span title={r.event}>{label('audit.events', r.event)}</span> },
          { key: 'user', label: t('audit.user'), render: (r) => r.user },
          { key: 'ip', label: t('audit.ip'), render: (r) => r.ip },
          { key: 'extra', label: t('audit.detail'), render: (r) => r.extra },
        ]}
      />
    </Page>
  );
}
