import { Badge, Button, Card, Group, MultiSelect, Table, Text, TextInput, Title } from '@mantine/core';
import { notifications } from '@mantine/notifications';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { useTranslation } from 'react-i18next';
import { api, call } from '../api/client.ts';
import { when } from '../i18n.ts';
import { Dialog, useConfirm } from '../components/dialogs.tsx';
import { DataTable, ErrorNote, atField, fieldError, Form, OnceSecret, Page, useLabel } from '../components/ui.tsx';

function Deliveries({ id }: { id: string }) {
  const { t } = useTranslation();
  const label = useLabel();
  const qc = useQueryClient();
  const d = useQuery({
    queryKey: ['webhooks', 'deliveries', id],
    queryFn: () => call(api.GET('/signal.ashx?webhooks=deliveries', { params: { query: { webhooks: 'deliveries', id } } })),
    // No polling: every change of a row arrives as a `webhook.delivery` notice on the live feed,
    // and the shell fetches this log again (App.tsx).
  });
  const redeliver = useMutation({
    mutationFn: (deliveryId: string) =>
      call(api.POST('/signal.ashx?webhooks=redeliver', { params: { query: { webhooks: 'redeliver' } }, body: { deliveryId } })),
    onSuccess: () => qc.invalidateQueries({ queryKey: ['webhooks', 'deliveries', id] }),
  });
  return (
    <Card withBorder>
      <Title order={2} size="h4" mb="sm">
        {t('webhooks.deliveries')}
      </Title>
      <ErrorNote error={d.error ?? redeliver.error} />
      <Table data-testid="deliveries">
        <Table.Thead>
          <Table.Tr>
            <Table.Th>{t('webhooks.event')}</Table.Th>
            <Table.Th>{t('webhooks.status')}</Table.Th>
            <Table.Th>{t('webhooks.attempts')}</Table.Th>
            <Table.Th>{t('common.created')}</Table.Th>
            <Table.Th>{t('common.actions')}</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {(d.data?.data ?? []).map((x) => (
            <Table.Tr key={x.id}>
              <Table.Td>{x.event}</Table.Td>
              <Table.Td>
                <Badge color={x.state === 'delivered' ? 'teal' : x.state === 'failed' ? 'red' : 'gray'} data-state={x.state}>
                  {label('webhooks.states', x.state)}
                </Badge>{' '}
                {x.lastStatus ?? ''} {x.lastError ?? ''}
              </Table.Td>
              <Table.Td>{x.attempts}</Table.Td>
              <Table.Td>{when(x.createdAtUtc)}</Table.Td>
              <Table.Td>
                <Button size="xs" variant="light" onClick={() => redeliver.mutate(x.id)}>
                  {t('webhooks.redeliver')}
                </Button>
              </Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </Card>
  );
}

/** Edits a subscription's receiver URL in place: the secret, the events and the delivery log stay. */
function EditWebhook({ hook, onClose }: { hook: { id: string; url: string } | undefined; onClose: () => void }) {
  const { t } = useTranslation();
  const qc = useQueryClient();
  const [url, setUrl] = useState('');
  const [was, setWas] = useState<string>();
  if (hook && was !== hook.id) {
    setWas(hook.id);
    setUrl(hook.url);
  }
  const save = useMutation({
    mutationFn: () => call(api.POST('/signal.ashx?webhooks=update', { params: { query: { webhooks: 'update' } }, body: { id: hook!.id, url } })),
    onSuccess: () => {
      notifications.show({ color: 'teal', message: t('office.saved'), closeButtonProps: { 'aria-label': t('common.close') } });
      setWas(undefined);
      onClose();
      void qc.invalidateQueries({ queryKey: ['webhooks'] });
    },
  });
  return (
    <Dialog opened={!!hook} onClose={onClose} title={t('office.editWebhook')}>
      <Form onSubmit={() => save.mutate()} busy={save.isPending}>
        <TextInput label={t('webhooks.url')} required value={url} onChange={(e) => setUrl(e.currentTarget.value)} error={fieldError(save.error, 'url', url)} />
        {save.error && !atField(save.error, ['url']) && <ErrorNote error={save.error} />}
        <Group justify="flex-end" mt="md">
          <Button type="submit" loading={save.isPending}>
            {t('office.saveChanges')}
          </Button>
        </Group>
      </Form>
    </Dialog>
  );
}

export default function Webhooks() {
  const { t } = useTranslation();
  const qc = useQueryClient();
  const [url, setUrl] = useState('');
  const [events, setEvents] = useState<string[]>(['*']);
  const [secret, setSecret] = useState<string>();
  const [open, setOpen] = useState<string>();
  const [ask, confirmation] = useConfirm();
  const [editing, setEditing] = useState<{ id: string; url: string }>();
  const list = useQuery({
    queryKey: ['webhooks', 'list'],
    queryFn: () => call(api.GET('/signal.ashx?webhooks=list', { params: { query: { webhooks: 'list' } } })),
  });
  // The names a subscription may list: the plugins' declared events (a typo cannot be picked).
  const declared = useQuery({
    queryKey: ['webhooks', 'events'],
    queryFn: () => call(api.GET('/api.ashx/v1/webhooks/events', { params: { query: { limit: 500 } } })),
    staleTime: Infinity,
  });
  const about = new Map((declared.data?.data ?? []).map((e) => [e.name, e.description]));
  const choices = [{ value: '*', label: t('webhooks.allEvents') }, ...(declared.data?.data ?? []).map((e) => ({ value: e.name, label: e.name }))];
  // `*` covers every event: picking it alone, or an event after it, keeps the list meaningful.
  const pick = (next: string[]) => {
    const added = next.find((v) => !events.includes(v));
    setEvents(added === '*' ? ['*'] : next.length > 1 ? next.filter((v) => v !== '*') : next);
  };
  const refresh = () => qc.invalidateQueries({ queryKey: ['webhooks'] });
  const add = useMutation({
    mutationFn: () => call(api.POST('/signal.ashx?webhooks=add', { params: { query: { webhooks: 'add' } }, body: { url, events } })),
    onSuccess: (r) => {
      setSecret(r.secret);
      setUrl('');
      void refresh();
    },
  });
  const act = useMutation({
    mutationFn: async ({ verb, id }: { verb: 'test' | 'pause' | 'resume' | 'remove'; id: string }): Promise<unknown> => {
      if (verb === 'pause') return call(api.POST('/signal.ashx?webhooks=pause', { params: { query: { webhooks: 'pause' } }, body: { id } }));
      if (verb === 'test') return call(api.POST('/signal.ashx?webhooks=test', { params: { query: { webhooks: 'test' } }, body: { id } }));
      if (verb === 'resume') return call(api.POST('/signal.ashx?webhooks=resume', { params: { query: { webhooks: 'resume' } }, body: { id } }));
      return call(api.POST('/signal.ashx?webhooks=remove', { params: { query: { webhooks: 'remove' } }, body: { id } }));
    },
    onSuccess: (_r, v) => {
      notifications.show({ color: 'teal', message: t(`webhooks.done.${v.verb}`) });
      if (v.verb === 'test') setOpen(v.id);
      void refresh();
    },
  });
  return (
    <Page title={t('nav.webhooks')}>
      {confirmation}
      <EditWebhook hook={editing} onClose={() => setEditing(undefined)} />
      <Card withBorder>
        <Form onSubmit={() => add.mutate()} busy={add.isPending}>
          <Group align="flex-end">
            <TextInput
              label={t('webhooks.url')}
              required
              value={url}
              onChange={(e) => setUrl(e.currentTarget.value)}
              error={fieldError(add.error, 'url', url)}
              w={380}
            />
            <MultiSelect
              label={t('webhooks.events')}
              description={t('webhooks.eventsHelp')}
              data={choices}
              value={events}
              onChange={pick}
              required
              searchable
              nothingFoundMessage={t('webhooks.noSuchEvent')}
              renderOption={({ option }) => (
                <div>
                  <Text size="sm">{option.label}</Text>
                  {about.get(option.value) && (
                    <Text size="xs" c="dimmed">
                      {about.get(option.value)}
                    </Text>
                  )}
                </div>
              )}
              error={fieldError(add.error, 'events', events, ['unknown_event']) ?? fieldError(declared.error, 'events')}
              w={380}
              data-testid="webhook-events"
            />
            <Button type="submit" loading={add.isPending}>
              {t('webhooks.add')}
            </Button>
          </Group>
        </Form>
        {add.error && !atField(add.error, ['url', 'events'], ['unknown_event']) && <ErrorNote error={add.error} />}
        {secret && <OnceSecret label={t('webhooks.secret')} value={secret} />}
      </Card>
      <ErrorNote error={list.error ?? act.error} />
      <DataTable
        caption={t('nav.webhooks')}
        rows={list.data}
        loading={list.isLoading}
        rowKey={(w) => w.id}
        columns={[
          { key: 'url', label: t('webhooks.url'), render: (w) => w.url },
          { key: 'events', label: t('webhooks.events'), render: (w) => w.events.join(', ') },
          {
            key: 'state',
            label: t('webhooks.status'),
            render: (w) => (
              <Badge color={!w.active ? 'red' : w.failures ? 'orange' : 'teal'}>
                {!w.active ? t('webhooks.paused') : w.failures ? t('webhooks.failing', { count: w.failures }) : t('webhooks.ok')}
              </Badge>
            ),
          },
          { key: 'last', label: t('webhooks.lastFired'), render: (w) => when(w.lastFiredUtc) },
          {
            key: 'actions',
            label: t('common.actions'),
            render: (w) => (
              <Group gap="xs">
                <Button size="xs" variant="light" onClick={() => act.mutate({ verb: 'test', id: w.id })}>
                  {t('webhooks.test')}
                </Button>
                <Button size="xs" variant="light" onClick={() => setOpen(open === w.id ? undefined : w.id)}>
                  {t('webhooks.deliveries')}
                </Button>
                <Button size="xs" variant="default" onClick={() => setEditing(w)} aria-label={t('office.editOf', { name: w.url })} data-testid="webhook-edit">
                  {t('office.edit')}
                </Button>
                {w.active ? (
                  <Button
                    size="xs"
                    variant="light"
                    color="orange"
                    data-testid="webhook-pause"
                    onClick={() =>
                      ask({
                        message: t('webhooks.confirmPause', { url: w.url }),
                        confirm: t('webhooks.pause'),
                        color: 'orange',
                        onConfirm: () => act.mutate({ verb: 'pause', id: w.id }),
                      })
                    }
                  >
                    {t('webhooks.pause')}
                  </Button>
                ) : (
                  <Button size="xs" variant="light" color="teal" onClick={() => act.mutate({ verb: 'resume', id: w.id })}>
                    {t('webhooks.resume')}
                  </Button>
                )}
                <Button
                  size="xs"
                  variant="light"
                  color="red"
                  onClick={() =>
                    ask({
                      message: t('webhooks.confirmDelete', { url: w.url }),
                      confirm: t('common.delete'),
                      onConfirm: () => act.mutate({ verb: 'remove', id: w.id }),
                    })
                  }
                >
                  {t('common.delete')}
                </Button>
              </Group>
            ),
          },
        ]}
      />
      {open && <Deliveries id={open} />}
    </Page>
  );
}
