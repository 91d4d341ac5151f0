import { Anchor, Group, SegmentedControl, TextInput } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { useTranslation } from 'react-i18next';
import { api, call } from '../api/client.ts';
import { dayStart, when } from '../i18n.ts';
import { DataTable, ErrorNote, Page, useLabel } from '../components/ui.tsx';
import { DownloadButton } from '../components/office.tsx';
import { withQuery } from '../lib/download.ts';
import { Shares, TranscriptView } from '../components/Transcript.tsx';

const PAGE = 50;

export default function Transcripts() {
  const { t } = useTranslation();
  const label = useLabel();
  const [q, setQ] = useState('');
  const [source, setSource] = useState<'both' | 'vnum' | 'outbound-ai'>('both');
  const [since, setSince] = useState('');
  const [page, setPage] = useState(1);
  const [open, setOpen] = useState<string>();
  const filter = { source, ...(q ? { q } : {}), ...(since ? { since: dayStart(since) } : {}) };
  const query = { limit: PAGE, offset: (page - 1) * PAGE, ...filter };
  const list = useQuery({
    queryKey: ['transcripts', 'list', query],
    queryFn: () => call(api.GET('/api.ashx/v1/transcripts', { params: { query } })),
    placeholderData: (p) => p,
  });
  return (
    <Page
      title={t('nav.transcripts')}
      actions={
        <DownloadButton
          path={withQuery('/api.ashx/v1/transcripts/export', filter)}
          filename="transcripts.csv"
          label={t('office.exportCsv')}
          data-testid="export-csv"
        />
      }
    >
      <Group align="flex-end">
        <TextInput label={t('common.search')} value={q} onChange={(e) => setQ(e.currentTarget.value)} w={260} />
        <SegmentedControl
          aria-label={t('transcripts.source')}
          value={source}
          onChange={(v) => setSource(v as typeof source)}
          data={[
            { value: 'both', label: t('transcripts.both') },
            { value: 'outbound-ai', label: t('transcripts.outbound') },
            { value: 'vnum', label: t('transcripts.vnum') },
          ]}
        />
        <TextInput label={t('common.since')} type="date" value={since} onChange={(e) => setSince(e.currentTarget.value)} />
      </Group>
      <ErrorNote error={list.error} />
      <DataTable
        caption={t('nav.transcripts')}
        rows={list.data?.data}
        loading={list.isLoading}
        total={list.data?.total}
        page={page}
        pageSize={PAGE}
        onPage={setPage}
        rowKey={(r) => r.callId}
        columns={[
          {
            key: 'id',
            label: t('calls.id'),
            render: (r) => (
              <Anchor component="button" type="button" onClick={() => setOpen(open === r.callId ? undefined : r.callId)}>
                {r.callId}
              </Anchor>
            ),
          },
          { key: 'started', label: t('transcripts.started'), render: (r) => when(r.startedUtc) },
          { key: 'phone', label: t('calls.phone'), render: (r) => r.phone },
          { key: 'outcome', label: t('transcripts.outcome'), render: (r) => label('transcripts.outcomes', r.outcome) },
        ]}
      />
      {open && (
        <>
          <TranscriptView callId={open} />
          <Shares callId={open} />
        </>
      )}
    </Page>
  );
}
