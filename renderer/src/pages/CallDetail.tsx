import { Card, Code, Group, Table, Text } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { useTranslation } from 'react-i18next';
import { useParams } from 'wouter';
import { api, call } from '../api/client.ts';
import { when } from '../i18n.ts';
import { CallStatusBadge } from '../components/CallStatusBadge.tsx';
import { Shares, TranscriptView } from '../components/Transcript.tsx';
import { ErrorNote, Page } from '../components/ui.tsx';
import { SipProblem } from '../components/office.tsx';

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
            <CallStatusBadge status={d.status} />
            <Text>{d.phone}</Text>
            <Text c="dimmed">{d.displayName}</Text>
          </Group>
          <Table mt="sm">
            <Table.Tbody>
              <Table.Tr>
                <Table.Th scope="row">{t('common.created')}</Table.Th>
                <Table.Td>{when(d.createdAtUtc)}</Table.Td>
              </Table.Tr>
              {d.scheduledForUtc && (
                <Table.Tr>
                  <Table.Th scope="row">{t('office.scheduledFor')}</Table.Th>
                  <Table.Td data-testid="scheduled-for">{when(d.scheduledForUtc)}</Table.Td>
                </Table.Tr>
              )}
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
                  <Code>{d.endedReason || '—'}</Code>
                </Table.Td>
              </Table.Tr>
              {d.errorDetail && (
                // What went wrong, as the API recorded it ("AI engine connection failed: ..."), with a
                // SIP answer explained in words.
                <Table.Tr>
                  <Table.Th scope="row">{t('office.cause')}</Table.Th>
                  <Table.Td data-testid="call-cause">
                    <SipProblem raw={d.errorDetail} />
                  </Table.Td>
                </Table.Tr>
              )}
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
