import { Button, Card, Group, NumberInput, ScrollArea, Stack, Table, Text, Title } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { useTranslation } from 'react-i18next';
import { api, call } from '../api/client.ts';
import { when } from '../i18n.ts';
import { ErrorNote, Form, OnceSecret } from './ui.tsx';

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
      <Form onSubmit={() => create.mutate()} busy={create.isPending}>
        <Group align="flex-end" my="sm">
          <NumberInput label={t('transcripts.ttlHours')} min={1} max={720} value={hours} onChange={(v) => setHours(Number(v))} w={160} />
          <Button type="submit" loading={create.isPending}>
            {t('transcripts.share')}
          </Button>
        </Group>
      </Form>
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
