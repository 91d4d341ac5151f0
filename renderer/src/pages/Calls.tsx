import { Anchor, Button, Group, MultiSelect, NumberInput, Textarea, TextInput } from '@mantine/core';
import { useDisclosure } from '@mantine/hooks';
import { notifications } from '@mantine/notifications';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { useTranslation } from 'react-i18next';
import { Link } from 'wouter';
import { api, call, type Body } from '../api/client.ts';
import { dayAfter, dayStart, when } from '../i18n.ts';
import { CallStatusBadge } from '../components/CallStatusBadge.tsx';
import { Dialog, useConfirm } from '../components/dialogs.tsx';
import { DownloadButton } from '../components/office.tsx';
import { withQuery } from '../lib/download.ts';
import { DataTable, ErrorNote, atField, fieldError, Form, Page } from '../components/ui.tsx';
import { CALL_STATES, callState } from '../lib/calls.ts';

const PAGE = 50;
type CallCreate = Partial<Body<'/api.ashx/v1/calls', 'post'>> & { phone: string; systemPrompt: string };

function placeCall(body: CallCreate) {
  // The server fills the defaults (voice, language, ...): the form sends what the operator set.
  return call(api.POST('/api.ashx/v1/calls', { body: body as Body<'/api.ashx/v1/calls', 'post'> }));
}

function PlaceCall({ onDone }: { onDone: () => void }) {
  const { t } = useTranslation();
  const [f, setF] = useState<CallCreate>({ phone: '', systemPrompt: '', maxSeconds: 300, retries: 0 });
  const [at, setAt] = useState('');
  const m = useMutation({
    mutationFn: () => placeCall({ ...f, ...(at ? { scheduleAtUtc: new Date(at).toISOString() } : {}) }),
    onSuccess: (r) => {
      // A scheduled call is not placed yet: the notice says when it will be.
      const message =
        r.status === 'scheduled' && at
          ? t('office.toastScheduled', { id: r.callId, when: when(new Date(at).toISOString()) })
          : t('calls.placed', { id: r.callId });
      notifications.show({ color: 'teal', message, closeButtonProps: { 'aria-label': t('common.close') } });
      onDone();
    },
  });
  // The API refuses a past time (schedule_in_past); the form says so in words, at the field.
  const atError = fieldError(m.error, 'scheduleAtUtc', at, ['schedule_in_past']);
  return (
    <Form onSubmit={() => m.mutate()} busy={m.isPending}>
      <TextInput
        label={t('calls.phone')}
        description="+4930123456"
        required
        value={f.phone}
        onChange={(e) => setF({ ...f, phone: e.currentTarget.value })}
        error={fieldError(m.error, 'phone', f.phone)}
      />
      <TextInput
        label={t('calls.displayName')}
        value={f.displayName ?? ''}
        onChange={(e) => setF({ ...f, displayName: e.currentTarget.value || undefined })}
        error={fieldError(m.error, 'displayName', f.displayName ?? '')}
      />
      <TextInput
        label={t('calls.email')}
        type="email"
        value={f.email ?? ''}
        onChange={(e) => setF({ ...f, email: e.currentTarget.value || undefined })}
        error={fieldError(m.error, 'email', f.email ?? '')}
      />
      <Textarea
        label={t('calls.prompt')}
        required
        autosize
        minRows={3}
        value={f.systemPrompt}
        onChange={(e) => setF({ ...f, systemPrompt: e.currentTarget.value })}
        error={fieldError(m.error, 'systemPrompt', f.systemPrompt)}
      />
      <Group grow>
        <NumberInput
          label={t('calls.maxSeconds')}
          min={10}
          max={3600}
          value={f.maxSeconds}
          onChange={(v) => setF({ ...f, maxSeconds: Number(v) })}
          error={fieldError(m.error, 'maxSeconds', f.maxSeconds)}
        />
        <NumberInput
          label={t('calls.retries')}
          min={0}
          max={10}
          value={f.retries}
          onChange={(v) => setF({ ...f, retries: Number(v) })}
          error={fieldError(m.error, 'retries', f.retries)}
        />
      </Group>
      <TextInput label={t('calls.scheduleAt')} type="datetime-local" value={at} onChange={(e) => setAt(e.currentTarget.value)} error={atError} />
      {m.error && !atField(m.error, ['phone', 'displayName', 'email', 'systemPrompt', 'maxSeconds', 'retries', 'scheduleAtUtc'], ['schedule_in_past']) && (
        <ErrorNote error={m.error} />
      )}
      <Group justify="flex-end" mt="md">
        <Button type="submit" loading={m.isPending}>
          {at ? t('calls.schedule') : t('calls.place')}
        </Button>
      </Group>
    </Form>
  );
}

export default function Calls() {
  const { t } = useTranslation();
  const qc = useQueryClient();
  const [page, setPage] = useState(1);
  const [status, setStatus] = useState<string[]>([]);
  const [phone, setPhone] = useState('');
  const [since, setSince] = useState('');
  const [until, setUntil] = useState('');
  const [opened, { open, close }] = useDisclosure(false);
  const [ask, confirmation] = useConfirm();
  const filter = {
    ...(status.length ? { status: status.join(',') } : {}),
    ...(phone ? { phone } : {}),
    ...(since ? { since: dayStart(since) } : {}),
    ...(until ? { until: dayAfter(until) } : {}),
  };
  const query = { limit: PAGE, offset: (page - 1) * PAGE, ...filter };
  const list = useQuery({
    queryKey: ['calls', 'list', query],
    queryFn: () => call(api.GET('/api.ashx/v1/calls', { params: { query } })),
    placeholderData: (p) => p,
  });
  const hangup = useMutation({
    mutationFn: (id: string) => call(api.POST('/api.ashx/v1/calls/{id}/hangup', { params: { path: { id }, query: {} } })),
    onSuccess: () => qc.invalidateQueries({ queryKey: ['calls'] }),
  });
  return (
    <Page
      title={t('nav.calls')}
      actions={
        <>
          <DownloadButton path={withQuery('/api.ashx/v1/calls/export', filter)} filename="calls.csv" label={t('office.exportCsv')} data-testid="export-csv" />
          <Button onClick={open} data-testid="place-call">
            {t('calls.new')}
          </Button>
        </>
      }
    >
      {confirmation}
      <Dialog opened={opened} onClose={close} title={t('calls.new')} size="lg">
        <PlaceCall
          onDone={() => {
            close();
            void qc.invalidateQueries({ queryKey: ['calls'] });
          }}
        />
      </Dialog>
      <Group align="flex-end">
        <MultiSelect
          label={t('calls.filterStatus')}
          data={CALL_STATES.map((s) => ({ value: s, label: t(`calls.status.${s}`) }))}
          value={status}
          onChange={(v) => {
            setStatus(v);
            setPage(1);
          }}
          clearable
          w={320}
        />
        <TextInput label={t('calls.phone')} value={phone} onChange={(e) => setPhone(e.currentTarget.value.replace(/[^0-9+]/g, ''))} w={160} />
        <TextInput label={t('common.from')} type="date" value={since} onChange={(e) => setSince(e.currentTarget.value)} />
        <TextInput label={t('common.to')} type="date" value={until} onChange={(e) => setUntil(e.currentTarget.value)} />
      </Group>
      <ErrorNote error={list.error ?? hangup.error} />
      <DataTable
        caption={t('nav.calls')}
        rows={list.data?.data}
        loading={list.isLoading}
        total={list.data?.total}
        page={page}
        pageSize={PAGE}
        onPage={setPage}
        rowKey={(c) => c.callId}
        columns={[
          {
            key: 'id',
            label: t('calls.id'),
            render: (c) => (
              <Anchor component={Link} href={`/calls/${c.callId}`}>
                {c.callId}
              </Anchor>
            ),
          },
          { key: 'phone', label: t('calls.phone'), render: (c) => c.phone },
          { key: 'status', label: t('calls.state'), render: (c) => <CallStatusBadge status={c.status} /> },
          { key: 'created', label: t('common.created'), render: (c) => when(c.createdAtUtc) },
          { key: 'scheduled', label: t('office.scheduledFor'), render: (c) => (c.scheduledForUtc ? when(c.scheduledForUtc) : '') },
          { key: 'duration', label: t('calls.duration'), render: (c) => (c.durationSec ? `${c.durationSec} s` : '') },
          {
            key: 'actions',
            label: t('common.actions'),
            render: (c) =>
              c.status === 'scheduled' ? (
                // Not a hang-up: nothing is dialled yet. Asked first, naming the call.
                <Button
                  size="xs"
                  color="red"
                  variant="light"
                  aria-label={t('office.cancelScheduledOf', { id: c.callId })}
                  onClick={() =>
                    ask({
                      message: t('office.confirmCancelScheduled', { phone: c.phone, when: when(c.scheduledForUtc) }),
                      confirm: t('office.cancelScheduled'),
                      onConfirm: () => hangup.mutate(c.callId),
                    })
                  }
                >
                  {t('office.cancelScheduled')}
                </Button>
              ) : callState(c.status)?.stoppable ? (
                <Button size="xs" color="red" variant="light" onClick={() => hangup.mutate(c.callId)} aria-label={t('calls.hangupOf', { id: c.callId })}>
                  {t('calls.hangup')}
                </Button>
              ) : null,
          },
        ]}
      />
    </Page>
  );
}
