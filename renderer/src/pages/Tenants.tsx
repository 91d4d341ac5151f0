import { Badge, Button, Card, Group, Text, TextInput } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { useTranslation } from 'react-i18next';
import { api, call } from '../api/client.ts';
import { Dialog } from '../components/dialogs.tsx';
import { DataTable, ErrorNote, fieldError, Form, Page } from '../components/ui.tsx';

export default function Tenants() {
  const { t } = useTranslation();
  const qc = useQueryClient();
  const list = useQuery({ queryKey: ['tenants'], queryFn: () => call(api.GET('/api.ashx/v1/tenants')) });
  const [host, setHost] = useState('');
  const [name, setName] = useState('');
  const [extra, setExtra] = useState<Record<string, string>>({});
  const [removing, setRemoving] = useState<{ id: string; host: string }>();
  const [confirm, setConfirm] = useState('');
  const refresh = () => qc.invalidateQueries({ queryKey: ['tenants'] });
  const add = useMutation({ mutationFn: () => call(api.POST('/api.ashx/v1/tenants', { body: { host, ...(name ? { name } : {}) } })), onSuccess: refresh });
  const addHost = useMutation({
    mutationFn: (id: string) => call(api.POST('/api.ashx/v1/tenants/{id}/hosts', { params: { path: { id } }, body: { host: extra[id] ?? '' } })),
    onSuccess: refresh,
  });
  const primary = useMutation({
    mutationFn: (id: string) => call(api.POST('/api.ashx/v1/tenants/{id}/primary', { params: { path: { id } } })),
    onSuccess: refresh,
  });
  const remove = useMutation({
    mutationFn: (id: string) => call(api.POST('/api.ashx/v1/tenants/{id}/remove', { params: { path: { id } }, body: { confirm } })),
    onSuccess: () => {
      setRemoving(undefined);
      setConfirm('');
      void refresh();
    },
  });
  const superAdmin = list.data?.superAdmin ?? false;
  return (
    <Page title={t('nav.tenants')}>
      {superAdmin && (
        <Card withBorder>
          <Form onSubmit={() => add.mutate()} busy={add.isPending}>
            <Group align="flex-end">
              <TextInput label={t('tenants.host')} value={host} onChange={(e) => setHost(e.currentTarget.value)} error={fieldError(add.error, 'host', host)} />
              <TextInput label={t('tenants.name')} value={name} onChange={(e) => setName(e.currentTarget.value)} error={fieldError(add.error, 'name', name)} />
              <Button type="submit" loading={add.isPending}>
                {t('common.add')}
              </Button>
            </Group>
          </Form>
        </Card>
      )}
      {!superAdmin && list.data && <Text c="dimmed">{t('tenants.onlyOwn')}</Text>}
      <ErrorNote error={list.error ?? addHost.error ?? primary.error ?? (add.error && !(add.error as { field?: string }).field ? add.error : undefined)} />
      <DataTable
        caption={t('nav.tenants')}
        rows={list.data?.data}
        loading={list.isLoading}
        rowKey={(x) => x.id}
        columns={[
          { key: 'host', label: t('tenants.host'), render: (x) => x.host },
          { key: 'name', label: t('tenants.name'), render: (x) => x.name },
          { key: 'hosts', label: t('tenants.hosts'), render: (x) => x.hosts.join(', ') },
          { key: 'p', label: t('tenants.primary'), render: (x) => (x.primary ? <Badge>{t('tenants.primary')}</Badge> : null) },
          {
            key: 'a',
            label: t('common.actions'),
            render: (x) =>
              superAdmin && (
                <Group gap="xs">
                  <Form onSubmit={() => addHost.mutate(x.id)} busy={addHost.isPending}>
                    <Group gap="xs">
                      <TextInput
                        size="xs"
                        aria-label={t('tenants.addHostFor', { host: x.host })}
                        placeholder="host"
                        value={extra[x.id] ?? ''}
                        onChange={(e) => setExtra({ ...extra, [x.id]: e.currentTarget.value })}
                      />
                      <Button type="submit" size="xs" variant="light">
                        {t('tenants.addHost')}
                      </Button>
                    </Group>
                  </Form>
                  {!x.primary && (
                    <>
                      <Button size="xs" variant="light" onClick={() => primary.mutate(x.id)}>
                        {t('tenants.makePrimary')}
                      </Button>
                      <Button size="xs" variant="light" color="red" onClick={() => setRemoving(x)} data-testid="tenant-remove">
                        {t('common.delete')}
                      </Button>
                    </>
                  )}
                </Group>
              ),
          },
        ]}
      />
      <Dialog opened={!!removing} onClose={() => setRemoving(undefined)} title={t('tenants.removeTitle')}>
        <Text size="sm" mb="sm">
          {t('tenants.removeWarning', { host: removing?.host })}
        </Text>
        <Form
          onSubmit={() => {
            if (removing && confirm === removing.host) remove.mutate(removing.id);
          }}
          busy={remove.isPending}
        >
          <TextInput
            label={t('tenants.typeHost')}
            value={confirm}
            onChange={(e) => setConfirm(e.currentTarget.value)}
            error={fieldError(remove.error, 'confirm', confirm)}
          />
          <Group justify="flex-end" mt="md">
            <Button type="submit" color="red" disabled={confirm !== removing?.host} loading={remove.isPending}>
              {t('common.delete')}
            </Button>
          </Group>
        </Form>
      </Dialog>
    </Page>
  );
}
