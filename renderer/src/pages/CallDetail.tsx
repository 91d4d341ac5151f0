import { Button, Card, Code, Group, NumberInput, ScrollArea, Stack, Table, Text, Title } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { useTranslation } from 'react-i18next';
import { useParams } from 'wouter';
import { api, call } from '../api/client.ts';
import { when } from '../i18n.ts';
import { ErrorNote, OnceSecret, Page } from '../lib/ui.tsx';
import { StatusBadge } from './Calls.tsx';

/** Share links of a transcript: create with a lifetime (the link is shown once), list, revoke. */
export function Shares({ callId }: { callId: string }) {
  const { t } = useTranslation();
  const qc = useQueryClient();
  const [hours, setHours] = useState<number>(24);
  const [created, setCreated] = useState<string>();
  const shares = useQuery({
    queryKey: ['transcripts', 'shares', callId],
    queryFn: () => call(api.GET('/api.ashx/v1/transcripts/{callId}/shares', { params: { path: { callId } } })),
  });
  const create = useMutation({
    mutationFn: () => call(api.POST('/api.ashx/v1/transcripts/{callId}/shares', { params: { path: { callId } }, body: { ttlHours: hours } })),
    onSuccess: (r) => {
      setCreated(r.url);
      void qc.invalidateQueries({ queryKey: ['transcripts', 'shares', callId] });
    },
  });
  const revoke = useMutation({
    mutationFn: (shareId: string) => call(api.POST('/api.ashx/v1/transcripts/{callId}/shares/{shareId}/revoke', { params: { path: { callId, shareId } } })),
    onSuccess: () => qc.invalidateQueries({ queryKey: ['transcripts', 'shares', callId] }),
  });
  return (
    <Card withBorder>
      <Title order={2} size="h4" mb="sm">
        {t('transcripts.shares')}
      </Title>
      <ErrorNote error={shares.error ?? create.error ?? revoke.error} />
      {created && <OnceSecret label={t('transcripts.shareLink')} value={created} />}
      <Group align="flex-end" my="sm">
        <NumberInput label={t('transcripts.ttlHours')} min={1} max={720} value={hours} onChange={(v) => setHours(Number(v))} w={160} />
        <Button onClick={() => create.mutate()} loading={create.isPending}>
          {t('transcripts.share')}
        </Button>
      </Group>
      <Table>
        <Table.Tbody>
          {(shares.data?.data ?? []).map((s) => (
            <Table.Tr key={s.id}>
              <Table.Td>{s.id}</Table.Td>
              <Table.Td>{when(s.expiresUtc)}</Table.Td>
              <Table.Td>{s.revokedUtc ? t('common.revoked') : ''}</Table.Td>
              <Table.Td>
                {!s.revokedUtc && (
                  <Button size="xs" variant="light" color="red" onClick={() => revoke.mutate(s.id)}>
                    {t('common.revoke')}
                  </Button>
                )}
              </Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </Card>
  );
}

export function TranscriptView({ callId }: { callId: string }) {
  const { t } = useTranslation();
  const tr = useQuery({
    queryKey: ['transcripts', 'one', callId],
    queryFn: () => call(api.GET('/api.ashx/v1/transcripts/{callId}', { params: { path: { callId } } })),
    retry: false,
  });
  if (tr.error) return <Text c="dimmed">{t('transcripts.none')}</Text>;
  return (
    <Card withBorder>
      <Title order={2} size="h4" mb="sm">
        {t('transcripts.transcript')}
      </Title>
      <ScrollArea h={320}>
        <Stack gap={4}>
          {(tr.data?.turns ?? []).map((turn, i) => (
            <Text key={i} size="sm">
              <b>{turn.speaker}:</b> {turn.text}
            </Text>
          ))}
        </Stack>
      </ScrollArea>
    </Card>
  );
}

export default function CallDetail() {
  const { t } = useTranslation();
  const { id } = useParams<{ id: string }>();
  const c = useQuery({ queryKey: ['calls', 'one', id], queryFn: () => call(api.GET('/api.ashx/v1/calls/{id}', { params: { path: { id } } })) });
  const d = c.data;
  return (
    <Page title={`${t('calls.call')} ${id}`}>
      <ErrorNote error={c.error} />
      {d && (
        <Card withBorder>
          <Group>
            <StatusBadge status={d.status} />
            <Text>{d.phone}</Text>
            <Text c="dimmed">{d.displayName}</Text>
          </Group>
          <Table mt="sm">
            <Table.Tbody>
              <Table.Tr>
                <Table.Th scope="row">{t('common.created')}</Table.Th>
                <Table.Td>{when(d.createdAtUtc)}</Table.Td>
              </Table.Tr>
              <Table.Tr>
                <Table.Th scope="row">{t('calls.answered')}</Table.Th>
                <Table.Td>{when(d.answeredAtUtc)}</Table.Td>
              </Table.Tr>
              <Table.Tr>
                <Table.Th scope="row">{t('calls.ended')}</Table.Th>
                <Table.Td>{when(d.endedAtUtc)}</Table.Td>
              </Table.Tr>
              <Table.Tr>
                <Table.Th scope="row">{t('calls.reason')}</Table.Th>
                <Table.Td>
                  <Code>{d.endedReason || d.errorDetail || '—'}</Code>
                </Table.Td>
              </Table.Tr>
            </Table.Tbody>
          </Table>
        </Card>
      )}
      {d?.transcriptPath && (
        <>
          <TranscriptView callId={id} />
          <Shares callId={id} />
        </>
      )}
    </Page>
  );
}
