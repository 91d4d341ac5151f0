import { ActionIcon, Badge, Button, Card, Checkbox, Group, MultiSelect, NumberInput, Select, Stack, Tabs, Text, TextInput } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { useTranslation } from 'react-i18next';
import { useSearch } from 'wouter';
import { api, call, type Body } from '../api/client.ts';
import { when } from '../i18n.ts';
import { useConfirm } from '../components/dialogs.tsx';
import { DataTable, ErrorNote, fieldError, Form, Page, useLabel } from '../components/ui.tsx';

function useOutboundRoutes() {
  return useQuery({ queryKey: ['routes', 'out'], queryFn: () => call(api.GET('/api.ashx/v1/outbound-routes', { params: { query: { limit: 500 } } })) });
}

function useTrunks() {
  return useQuery({ queryKey: ['status', 'trunks'], queryFn: () => call(api.GET('/signal.ashx?trunks=list', { params: { query: { trunks: 'list' } } })) });
}

function Trunks() {
  const { t } = useTranslation();
  const qc = useQueryClient();
  const list = useTrunks();
  const routes = useOutboundRoutes();
  const [ask, confirmation] = useConfirm();
  const label = useLabel();
  const [f, setF] = useState({ name: '', host: '', port: 5060, transport: 'udp' as 'udp' | 'tcp', username: '', password: '', register: false });
  const save = useMutation({
    mutationFn: () =>
      call(
        api.POST('/signal.ashx?trunks=save', {
          params: { query: { trunks: 'save' } },
          body: { ...f, password: f.password || undefined } as Body<'/signal.ashx?trunks=save', 'post'>,
        }),
      ),
    onSuccess: () => qc.invalidateQueries({ queryKey: ['status', 'trunks'] }),
  });
  const remove = useMutation({
    mutationFn: (id: string) => call(api.POST('/signal.ashx?trunks=remove', { params: { query: { trunks: 'remove' } }, body: { id } })),
    onSuccess: () => qc.invalidateQueries({ queryKey: ['status', 'trunks'] }),
  });
  return (
    <Stack>
      {confirmation}
      <Card withBorder>
        <Form onSubmit={() => save.mutate()} busy={save.isPending}>
          <Group align="flex-end">
            <TextInput
              label={t('telephony.name')}
              required
              value={f.name}
              onChange={(e) => setF({ ...f, name: e.currentTarget.value })}
              error={fieldError(save.error, 'name')}
            />
            <TextInput
              label={t('telephony.host')}
              required
              value={f.host}
              onChange={(e) => setF({ ...f, host: e.currentTarget.value })}
              error={fieldError(save.error, 'host')}
            />
            <NumberInput
              label={t('telephony.port')}
              value={f.port}
              onChange={(v) => setF({ ...f, port: Number(v) })}
              w={100}
              error={fieldError(save.error, 'port')}
            />
            <Select
              label={t('telephony.transport')}
              data={['udp', 'tcp'].map((x) => ({ value: x, label: label('telephony.transports', x) }))}
              value={f.transport}
              onChange={(v) => setF({ ...f, transport: (v ?? 'udp') as 'udp' | 'tcp' })}
              w={100}
            />
            <TextInput label={t('telephony.username')} value={f.username} onChange={(e) => setF({ ...f, username: e.currentTarget.value })} />
            <TextInput
              label={t('telephony.password')}
              type="password"
              autoComplete="new-password"
              value={f.password}
              onChange={(e) => setF({ ...f, password: e.currentTarget.value })}
            />
            <Checkbox label={t('telephony.register')} checked={f.register} onChange={(e) => setF({ ...f, register: e.currentTarget.checked })} />
            <Button type="submit" loading={save.isPending}>
              {t('common.save')}
            </Button>
          </Group>
        </Form>
        <ErrorNote error={save.error && !(save.error as { field?: string }).field ? save.error : undefined} />
      </Card>
      <ErrorNote error={list.error ?? remove.error} />
      <DataTable
        caption={t('telephony.trunks')}
        rows={list.data?.trunks}
        loading={list.isLoading}
        rowKey={(r) => r.id}
        columns={[
          { key: 'id', label: 'ID', render: (r) => r.id },
          { key: 'name', label: t('telephony.name'), render: (r) => r.name },
          { key: 'host', label: t('telephony.host'), render: (r) => `${r.host}:${r.port} (${label('telephony.transports', r.transport)})` },
          {
            key: 'reg',
            label: t('telephony.registration'),
            render: (r) => (
              <Badge color={r.registered === true ? 'green' : r.registered === false ? 'red' : 'gray'}>
                {r.registered === true ? t('telephony.registered') : r.registered === false ? t('telephony.notRegistered') : t('telephony.unknown')}
              </Badge>
            ),
          },
          { key: 'err', label: t('telephony.lastError'), render: (r) => r.lastError ?? '' },
          {
            key: 'a',
            label: t('common.actions'),
            render: (r) => (
              <Button
                size="xs"
                color="red"
                variant="light"
                onClick={() => {
                  // Name the trunk and what depends on it: deleting it leaves these routes without it.
                  const using = (routes.data?.data ?? []).filter((x) => x.trunkIds.includes(r.id)).length;
                  ask({
                    message: `${t('telephony.confirmDeleteTrunk', { name: r.name || r.id })}${using ? ` ${t('telephony.trunkInUse', { count: using })}` : ''}`,
                    confirm: t('common.delete'),
                    onConfirm: () => remove.mutate(r.id),
                  });
                }}
              >
                {t('common.delete')}
              </Button>
            ),
          },
        ]}
      />
    </Stack>
  );
}

/** Outbound routes: a dial prefix and its trunks in failover order (drag, or move up and down, to reorder). */
function Outbound() {
  const { t } = useTranslation();
  const qc = useQueryClient();
  const trunks = useTrunks();
  const list = useOutboundRoutes();
  const [match, setMatch] = useState('');
  const [ids, setIds] = useState<string[]>([]);
  const refresh = () => qc.invalidateQueries({ queryKey: ['routes', 'out'] });
  const create = useMutation({ mutationFn: () => call(api.POST('/api.ashx/v1/outbound-routes', { body: { match, trunkIds: ids } })), onSuccess: refresh });
  const update = useMutation({
    mutationFn: (v: { match: string; trunkIds: string[] }) =>
      call(api.PUT('/api.ashx/v1/outbound-routes/{match}', { params: { path: { match: v.match } }, body: { trunkIds: v.trunkIds } })),
    onSuccess: refresh,
  });
  const remove = useMutation({
    mutationFn: (m: string) => call(api.DELETE('/api.ashx/v1/outbound-routes/{match}', { params: { path: { match: m } } })),
    onSuccess: refresh,
  });
  const reorder = (r: { match: string; trunkIds: string[] }, from: number, to: number) => {
    if (from === to || from < 0 || to < 0 || from >= r.trunkIds.length || to >= r.trunkIds.length) return;
    const next = [...r.trunkIds];
    const [moved] = next.splice(from, 1);
    next.splice(to, 0, moved!);
    update.mutate({ match: r.match, trunkIds: next });
  };
  const move = (r: { match: string; trunkIds: string[] }, i: number, d: -1 | 1) => reorder(r, i, i + d);
  // Drag a trunk onto another to put it in that place (the buttons do the same from the keyboard).
  const [dragging, setDragging] = useState<{ match: string; from: number }>();
  return (
    <Stack>
      <Card withBorder>
        <Form onSubmit={() => create.mutate()} busy={create.isPending}>
          <Group align="flex-end">
            <TextInput
              label={t('telephony.prefix')}
              description="+49*, global"
              value={match}
              onChange={(e) => setMatch(e.currentTarget.value)}
              error={fieldError(create.error, 'match')}
            />
            <MultiSelect
              label={t('telephony.trunks')}
              data={(trunks.data?.trunks ?? []).map((x) => x.id)}
              value={ids}
              onChange={setIds}
              w={300}
              error={fieldError(create.error, 'trunkIds')}
            />
            <Button type="submit" loading={create.isPending} data-testid="add-route">
              {t('common.add')}
            </Button>
          </Group>
        </Form>
      </Card>
      <ErrorNote
        error={list.error ?? update.error ?? remove.error ?? (create.error && !(create.error as { field?: string }).field ? create.error : undefined)}
      />
      <DataTable
        caption={t('telephony.outbound')}
        rows={list.data?.data}
        loading={list.isLoading}
        rowKey={(r) => r.match}
        columns={[
          { key: 'match', label: t('telephony.prefix'), render: (r) => r.match },
          {
            key: 'trunks',
            label: t('telephony.failoverOrder'),
            render: (r) => (
              <Stack gap={2} data-testid={`route-${r.match}`}>
                {r.trunkIds.map((id, i) => (
                  <Group
                    key={id}
                    gap={4}
                    draggable
                    data-testid="route-trunk-row"
                    style={{ cursor: 'grab', opacity: dragging?.match === r.match && dragging.from === i ? 0.5 : 1 }}
                    onDragStart={(e) => {
                      e.dataTransfer.effectAllowed = 'move';
                      e.dataTransfer.setData('text/plain', id);
                      setDragging({ match: r.match, from: i });
                    }}
                    onDragOver={(e) => {
                      if (dragging?.match === r.match) e.preventDefault();
                    }}
                    onDrop={(e) => {
                      e.preventDefault();
                      if (dragging?.match === r.match) reorder(r, dragging.from, i);
                      setDragging(undefined);
                    }}
                    onDragEnd={() => setDragging(undefined)}
                  >
                    <Text size="sm" w={24}>
                      {i + 1}.
                    </Text>
                    <Text size="sm" data-testid="route-trunk">
                      {id}
                    </Text>
                    <ActionIcon size="sm" variant="subtle" disabled={i === 0} onClick={() => move(r, i, -1)} aria-label={t('telephony.moveUp', { id })}>
                      ↑
                    </ActionIcon>
                    <ActionIcon
                      size="sm"
                      variant="subtle"
                      disabled={i === r.trunkIds.length - 1}
                      onClick={() => move(r, i, 1)}
                      aria-label={t('telephony.moveDown', { id })}
                    >
                      ↓
                    </ActionIcon>
                  </Group>
                ))}
              </Stack>
            ),
          },
          {
            key: 'a',
            label: t('common.actions'),
            render: (r) => (
              <Button size="xs" color="red" variant="light" onClick={() => remove.mutate(r.match)}>
                {t('common.delete')}
              </Button>
            ),
          },
        ]}
      />
    </Stack>
  );
}

/** Inbound routes: first match by Did and caller; the `*` catchall is always evaluated last. */
function Inbound() {
  const { t } = useTranslation();
  const qc = useQueryClient();
  const list = useQuery({ queryKey: ['routes', 'in'], queryFn: () => call(api.GET('/api.ashx/v1/inbound-routes', { params: { query: { limit: 500 } } })) });
  const [f, setF] = useState({ did: '', fromNumber: '', user: '' });
  const refresh = () => qc.invalidateQueries({ queryKey: ['routes', 'in'] });
  const create = useMutation({ mutationFn: () => call(api.POST('/api.ashx/v1/inbound-routes', { body: f })), onSuccess: refresh });
  const remove = useMutation({
    mutationFn: (r: { did: string; fromNumber: string }) =>
      call(
        api.DELETE('/api.ashx/v1/inbound-routes/{did}', {
          params: { path: { did: r.did } },
          // fromNumber picks one of the Did's rows; the route reads it from the query.
          querySerializer: () => new URLSearchParams({ fromNumber: r.fromNumber }).toString(),
        }),
      ),
    onSuccess: refresh,
  });
  const rows = [...(list.data?.data ?? [])].sort((a, b) => Number(a.did === '*') - Number(b.did === '*'));
  return (
    <Stack>
      <Card withBorder>
        <Form onSubmit={() => create.mutate()} busy={create.isPending}>
          <Group align="flex-end">
            <TextInput
              label="Did"
              description="+4930123*, anonymous, *"
              value={f.did}
              onChange={(e) => setF({ ...f, did: e.currentTarget.value })}
              error={fieldError(create.error, 'did')}
            />
            <TextInput
              label={t('telephony.fromNumber')}
              value={f.fromNumber}
              onChange={(e) => setF({ ...f, fromNumber: e.currentTarget.value })}
              error={fieldError(create.error, 'fromNumber')}
            />
            <TextInput
              label={t('telephony.target')}
              value={f.user}
              onChange={(e) => setF({ ...f, user: e.currentTarget.value })}
              error={fieldError(create.error, 'user')}
            />
            <Button type="submit" loading={create.isPending}>
              {t('common.add')}
            </Button>
          </Group>
        </Form>
      </Card>
      <ErrorNote error={list.error ?? remove.error ?? (create.error && !(create.error as { field?: string }).field ? create.error : undefined)} />
      <DataTable
        caption={t('telephony.inbound')}
        rows={rows}
        loading={list.isLoading}
        rowKey={(r) => `${r.did}|${r.fromNumber}`}
        columns={[
          { key: 'did', label: 'Did', render: (r) => r.did },
          { key: 'from', label: t('telephony.fromNumber'), render: (r) => r.fromNumber || '—' },
          { key: 'user', label: t('telephony.target'), render: (r) => r.user },
          {
            key: 'a',
            label: t('common.actions'),
            render: (r) => (
              <Button size="xs" color="red" variant="light" onClick={() => remove.mutate(r)}>
                {t('common.delete')}
              </Button>
            ),
          },
        ]}
      />
    </Stack>
  );
}

function Numbers() {
  const { t } = useTranslation();
  const label = useLabel();
  const qc = useQueryClient();
  const list = useQuery({ queryKey: ['numbers'], queryFn: () => call(api.GET('/signal.ashx?numbers=list', { params: { query: { numbers: 'list' } } })) });
  const [f, setF] = useState({ number: '', name: '', systemPrompt: '' });
  const save = useMutation({
    mutationFn: () =>
      call(api.POST('/signal.ashx?numbers=save', { params: { query: { numbers: 'save' } }, body: f as Body<'/signal.ashx?numbers=save', 'post'> })),
    onSuccess: () => qc.invalidateQueries({ queryKey: ['numbers'] }),
  });
  const remove = useMutation({
    mutationFn: (number: string) => call(api.POST('/signal.ashx?numbers=remove', { params: { query: { numbers: 'remove' } }, body: { number } })),
    onSuccess: () => qc.invalidateQueries({ queryKey: ['numbers'] }),
  });
  return (
    <Stack>
      <Card withBorder>
        <Form onSubmit={() => save.mutate()} busy={save.isPending}>
          <Group align="flex-end">
            <TextInput
              label={t('telephony.number')}
              value={f.number}
              onChange={(e) => setF({ ...f, number: e.currentTarget.value })}
              error={fieldError(save.error, 'number')}
            />
            <TextInput label={t('telephony.name')} value={f.name} onChange={(e) => setF({ ...f, name: e.currentTarget.value })} />
            <TextInput label={t('calls.prompt')} value={f.systemPrompt} onChange={(e) => setF({ ...f, systemPrompt: e.currentTarget.value })} w={360} />
            <Button type="submit" loading={save.isPending}>
              {t('common.save')}
            </Button>
          </Group>
        </Form>
      </Card>
      <ErrorNote error={list.error ?? remove.error ?? (save.error && !(save.error as { field?: string }).field ? save.error : undefined)} />
      <DataTable
        caption={t('telephony.numbers')}
        rows={list.data?.numbers}
        loading={list.isLoading}
        rowKey={(r) => r.number}
        columns={[
          { key: 'n', label: t('telephony.number'), render: (r) => r.number },
          { key: 'name', label: t('telephony.name'), render: (r) => r.name },
          { key: 'v', label: t('telephony.visibility'), render: (r) => label('telephony.visibilities', r.visibility) },
          {
            key: 'a',
            label: t('common.actions'),
            render: (r) => (
              <Button size="xs" color="red" variant="light" onClick={() => remove.mutate(r.number)}>
                {t('common.delete')}
              </Button>
            ),
          },
        ]}
      />
    </Stack>
  );
}

function Whitelist() {
  const { t } = useTranslation();
  const qc = useQueryClient();
  const list = useQuery({ queryKey: ['whitelist'], queryFn: () => call(api.GET('/signal.ashx?whitelist=list', { params: { query: { whitelist: 'list' } } })) });
  const [number, setNumber] = useState('');
  const [comment, setComment] = useState('');
  const add = useMutation({
    mutationFn: () => call(api.POST('/signal.ashx?whitelist=add', { params: { query: { whitelist: 'add' } }, body: { number, comment } })),
    onSuccess: () => qc.invalidateQueries({ queryKey: ['whitelist'] }),
  });
  return (
    <Stack>
      <Card withBorder>
        <Form onSubmit={() => add.mutate()} busy={add.isPending}>
          <Group align="flex-end">
            <TextInput
              label={t('telephony.number')}
              value={number}
              onChange={(e) => setNumber(e.currentTarget.value)}
              error={fieldError(add.error, 'number')}
            />
            <TextInput label={t('telephony.comment')} value={comment} onChange={(e) => setComment(e.currentTarget.value)} />
            <Button type="submit" loading={add.isPending}>
              {t('common.add')}
            </Button>
          </Group>
        </Form>
      </Card>
      <ErrorNote error={list.error} />
      <DataTable
        caption={t('telephony.whitelist')}
        rows={list.data}
        loading={list.isLoading}
        rowKey={(r) => r.number}
        columns={[
          { key: 'n', label: t('telephony.number'), render: (r) => r.number },
          { key: 'c', label: t('telephony.comment'), render: (r) => r.comment },
          { key: 'when', label: t('common.created'), render: (r) => when(r.addedAtUtc) },
        ]}
      />
    </Stack>
  );
}

/** The tenant's telephony settings: default trunk, the AI engine key (write-only) and model. */
function Settings() {
  const { t } = useTranslation();
  const qc = useQueryClient();
  const trunks = useTrunks();
  const cur = useQuery({
    queryKey: ['telephony', 'settings'],
    queryFn: () => call(api.GET('/signal.ashx?telephony=settings', { params: { query: { telephony: 'settings' } } })),
  });
  const [f, setF] = useState<{ defaultTrunkId?: string; engineApiKey?: string; model?: string }>({});
  const save = useMutation({
    mutationFn: () => call(api.POST('/signal.ashx?telephony=settings-save', { params: { query: { telephony: 'settings-save' } }, body: f })),
    onSuccess: () => {
      setF({});
      void qc.invalidateQueries({ queryKey: ['telephony', 'settings'] });
    },
  });
  const c = cur.data;
  return (
    <Card withBorder>
      <Form onSubmit={() => save.mutate()} busy={save.isPending}>
        <Stack maw={480}>
          <Select
            label={t('telephony.defaultTrunk')}
            data={(trunks.data?.trunks ?? []).map((x) => x.id)}
            value={f.defaultTrunkId ?? c?.defaultTrunkId ?? null}
            onChange={(v) => setF({ ...f, defaultTrunkId: v ?? '' })}
            error={fieldError(save.error, 'defaultTrunkId')}
          />
          <TextInput
            label={t('telephony.engineKey')}
            description={c?.hasEngineApiKey ? t('telephony.engineKeySet') : t('telephony.engineKeyUnset')}
            type="password"
            autoComplete="off"
            value={f.engineApiKey ?? ''}
            onChange={(e) => setF({ ...f, engineApiKey: e.currentTarget.value })}
            error={fieldError(save.error, 'engineApiKey')}
          />
          <TextInput
            label={t('telephony.model')}
            value={f.model ?? c?.model ?? ''}
            onChange={(e) => setF({ ...f, model: e.currentTarget.value })}
            error={fieldError(save.error, 'model')}
          />
          <ErrorNote error={cur.error ?? (save.error && !(save.error as { field?: string }).field ? save.error : undefined)} />
          <Group>
            <Button type="submit" loading={save.isPending}>
              {t('common.save')}
            </Button>
          </Group>
        </Stack>
      </Form>
    </Card>
  );
}

const TABS = ['trunks', 'outbound', 'inbound', 'numbers', 'whitelist', 'settings'];

export default function Telephony() {
  const { t } = useTranslation();
  // `?tab=` opens a tab: the dashboard's setup checklist links to each item's form.
  const asked = new URLSearchParams(useSearch()).get('tab') ?? '';
  return (
    <Page title={t('nav.telephony')}>
      <Tabs key={asked} defaultValue={TABS.includes(asked) ? asked : 'trunks'} keepMounted={false}>
        <Tabs.List>
          <Tabs.Tab value="trunks">{t('telephony.trunks')}</Tabs.Tab>
          <Tabs.Tab value="outbound">{t('telephony.outbound')}</Tabs.Tab>
          <Tabs.Tab value="inbound">{t('telephony.inbound')}</Tabs.Tab>
          <Tabs.Tab value="numbers">{t('telephony.numbers')}</Tabs.Tab>
          <Tabs.Tab value="whitelist">{t('telephony.whitelist')}</Tabs.Tab>
          <Tabs.Tab value="settings">{t('telephony.settings')}</Tabs.Tab>
        </Tabs.List>
        <Tabs.Panel value="trunks" pt="md">
          <Trunks />
        </Tabs.Panel>
        <Tabs.Panel value="outbound" pt="md">
          <Outbound />
        </Tabs.Panel>
        <Tabs.Panel value="inbound" pt="md">
          <Inbound />
        </Tabs.Panel>
        <Tabs.Panel value="numbers" pt="md">
          <Numbers />
        </Tabs.Panel>
        <Tabs.Panel value="whitelist" pt="md">
          <Whitelist />
        </Tabs.Panel>
        <Tabs.Panel value="settings" pt="md">
          <Settings />
        </Tabs.Panel>
      </Tabs>
    </Page>
  );
}
