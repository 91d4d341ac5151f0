import {
  ActionIcon,
  Anchor,
  Badge,
  Button,
  Card,
  Checkbox,
  Code,
  Group,
  MultiSelect,
  NativeSelect,
  NumberInput,
  Select,
  Stack,
  Tabs,
  Text,
  Textarea,
  TextInput,
} from '@mantine/core';
import { notifications } from '@mantine/notifications';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { useTranslation } from 'react-i18next';
import { useSearch } from 'wouter';
import { api, call, type Body } from '../api/client.ts';
import { VOICES } from '../api/enums.ts';
import { when } from '../i18n.ts';
import { useConfirm } from '../components/dialogs.tsx';
import { DataTable, ErrorNote, fieldError, Form, Page, useLabel } from '../components/ui.tsx';
import { SipProblem } from '../components/office.tsx';

type TrunkView = NonNullable<ReturnType<typeof useTrunks>['data']>['trunks'][number];
/** The trunk settings the CLI had alone (caller id, codecs, max calls, SRV), kept apart from the form's first fields. */
const MORE_TRUNK = {
  callerId: '',
  codecs: ['G722', 'PCMU', 'PCMA'] as ('G722' | 'PCMU' | 'PCMA')[],
  maxConcurrentCalls: 10,
  dnsSrv: false,
  srtp: 'off' as 'required' | 'optional' | 'off',
};

/** The values of `row` under the keys `cur` has (an edit form takes the row's fields, whatever fields the form has). */
function fromRow<T extends object>(cur: T, row: object): Partial<T> {
  return Object.fromEntries(Object.keys(cur).flatMap((k) => (k in row ? [[k, (row as Record<string, unknown>)[k]]] : []))) as Partial<T>;
}

function useOutboundRoutes() {
  return useQuery({ queryKey: ['routes', 'out'], queryFn: () => call(api.GET('/api.ashx/v1/outbound-routes', { params: { query: { limit: 500 } } })) });
}

function useTrunks() {
  return useQuery({ queryKey: ['status', 'trunks'], queryFn: () => call(api.GET('/signal.ashx?trunks=list', { params: { query: { trunks: 'list' } } })) });
}

const TRANSPORTS = ['udp', 'tcp', 'tls'] as const;
type Transport = (typeof TRANSPORTS)[number];

/** SIP over TLS for desk phones: where they register and the CA they must trust (`?phones=tls`). */
function DeskPhoneTls() {
  const { t } = useTranslation();
  const q = useQuery({ queryKey: ['status', 'phones-tls'], queryFn: () => call(api.GET('/signal.ashx?phones=tls', { params: { query: { phones: 'tls' } } })) });
  const v = q.data;
  const href = v?.caPem ? `data:application/x-pem-file;charset=utf-8,${encodeURIComponent(v.caPem)}` : undefined;
  return (
    <Card withBorder>
      <ErrorNote error={q.error} />
      {v && (
        <Stack gap="xs">
          <Text fw={600}>{t('telephony.phoneTls')}</Text>
          {v.enabled ? (
            <Text>{t('telephony.phoneTlsAt', { host: v.host, port: v.port })}</Text>
          ) : (
            <Text c="dimmed">{t('telephony.phoneTlsOff', { reason: v.reason })}</Text>
          )}
          {href && (
            <>
              <Anchor href={href} download="sovcomms-ca.pem">
                {t('telephony.phoneTlsCa')}
              </Anchor>
              <Text size="sm">
                {t('telephony.phoneTlsFingerprint')} <Code>{v.caSha256}</Code>
              </Text>
            </>
          )}
        </Stack>
      )}
    </Card>
  );
}

function Trunks() {
  const { t } = useTranslation();
  const qc = useQueryClient();
  const list = useTrunks();
  const routes = useOutboundRoutes();
  const [ask, confirmation] = useConfirm();
  const label = useLabel();
  const [f, setF] = useState({ name: '', host: '', port: 5060, transport: 'udp' as Transport, username: '', password: '', register: false, tlsCaPem: '' });
  const [blank] = useState(f);
  const [more, setMore] = useState(MORE_TRUNK);
  // The trunk being edited (its id is kept: saving under it updates that trunk, the password stays unless typed).
  const [editing, setEditing] = useState<string>();
  const settings = useQuery({
    queryKey: ['telephony', 'settings'],
    queryFn: () => call(api.GET('/signal.ashx?telephony=settings', { params: { query: { telephony: 'settings' } } })),
  });
  const stopEditing = () => {
    setEditing(undefined);
    setF(blank);
    setMore(MORE_TRUNK);
  };
  const edit = (r: TrunkView) => {
    setEditing(r.id);
    setF((cur) => ({ ...cur, ...fromRow(cur, r), password: '' }));
    setMore({ ...MORE_TRUNK, ...fromRow(MORE_TRUNK, r) });
  };
  const save = useMutation({
    mutationFn: () =>
      call(
        api.POST('/signal.ashx?trunks=save', {
          params: { query: { trunks: 'save' } },
          body: { ...f, ...more, ...(editing ? { id: editing } : {}), password: f.password || undefined } as Body<'/signal.ashx?trunks=save', 'post'>,
        }),
      ),
    onSuccess: () => {
      if (editing) stopEditing();
      void qc.invalidateQueries({ queryKey: ['status', 'trunks'] });
    },
  });
  const remove = useMutation({
    // force: the operator confirmed a dialog naming the routes that list the trunk (it leaves them).
    mutationFn: (v: { id: string; force: boolean }) => call(api.POST('/signal.ashx?trunks=remove', { params: { query: { trunks: 'remove' } }, body: v })),
    onSuccess: () => Promise.all([qc.invalidateQueries({ queryKey: ['status', 'trunks'] }), qc.invalidateQueries({ queryKey: ['routes', 'out'] })]),
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
              error={fieldError(save.error, 'name', f.name)}
            />
            <TextInput
              label={t('telephony.host')}
              required
              value={f.host}
              onChange={(e) => setF({ ...f, host: e.currentTarget.value })}
              error={fieldError(save.error, 'host', f.host)}
            />
            <NumberInput
              label={t('telephony.port')}
              value={f.port}
              onChange={(v) => setF({ ...f, port: Number(v) })}
              w={100}
              error={fieldError(save.error, 'port', f.port)}
            />
            <Select
              label={t('telephony.transport')}
              data={TRANSPORTS.map((x) => ({ value: x, label: label('telephony.transports', x) }))}
              value={f.transport}
              // RFC 3261 §19.1.2: TLS listens on 5061 unless the carrier says otherwise.
              onChange={(v) =>
                setF({
                  ...f,
                  transport: (v ?? 'udp') as Transport,
                  port: f.port === 5060 && v === 'tls' ? 5061 : f.port === 5061 && v !== 'tls' ? 5060 : f.port,
                })
              }
              w={100}
            />
            {f.transport === 'tls' && (
              <Textarea
                label={t('telephony.tlsCa')}
                description={t('telephony.tlsCaHint')}
                value={f.tlsCaPem}
                onChange={(e) => setF({ ...f, tlsCaPem: e.currentTarget.value })}
                error={fieldError(save.error, 'tlsCaPem', f.tlsCaPem)}
                autosize
                maxRows={4}
                w={320}
              />
            )}
            <TextInput label={t('telephony.username')} value={f.username} onChange={(e) => setF({ ...f, username: e.currentTarget.value })} />
            <TextInput
              label={t('telephony.password')}
              type="password"
              autoComplete="new-password"
              value={f.password}
              onChange={(e) => setF({ ...f, password: e.currentTarget.value })}
            />
            <Checkbox label={t('telephony.register')} checked={f.register} onChange={(e) => setF({ ...f, register: e.currentTarget.checked })} />
            <Select
              label={t('telephony.srtp')}
              data={(['off', 'optional', 'required'] as const).map((x) => ({ value: x, label: label('telephony.srtpPolicies', x) }))}
              value={more.srtp}
              onChange={(v) => setMore({ ...more, srtp: (v ?? 'off') as 'required' | 'optional' | 'off' })}
              w={150}
            />
          </Group>
          <Group align="flex-end" mt="sm">
            <TextInput
              label={t('office.callerId')}
              value={more.callerId}
              onChange={(e) => setMore({ ...more, callerId: e.currentTarget.value })}
              error={fieldError(save.error, 'callerId', more.callerId)}
            />
            <MultiSelect
              label={t('office.codecs')}
              data={['G722', 'PCMU', 'PCMA']}
              value={more.codecs}
              onChange={(v) => setMore({ ...more, codecs: v as ('G722' | 'PCMU' | 'PCMA')[] })}
              error={fieldError(save.error, 'codecs', more.codecs)}
              w={220}
            />
            <NumberInput
              label={t('office.maxCalls')}
              min={1}
              max={1000}
              value={more.maxConcurrentCalls}
              onChange={(v) => setMore({ ...more, maxConcurrentCalls: Number(v) })}
              error={fieldError(save.error, 'maxConcurrentCalls', more.maxConcurrentCalls)}
              w={180}
            />
            <Checkbox label={t('office.srv')} checked={more.dnsSrv} onChange={(e) => setMore({ ...more, dnsSrv: e.currentTarget.checked })} />
            <Button type="submit" loading={save.isPending}>
              {editing ? t('office.saveChanges') : t('common.save')}
            </Button>
            {editing && (
              <Button variant="default" onClick={stopEditing}>
                {t('office.cancelEdit')}
              </Button>
            )}
          </Group>
          {editing && (
            <Text size="sm" mt="xs" data-testid="editing">
              {t('office.editing', { name: editing })}
            </Text>
          )}
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
          { key: 'err', label: t('telephony.lastError'), render: (r) => <SipProblem raw={r.lastError} /> },
          {
            key: 'a',
            label: t('common.actions'),
            render: (r) => (
              <Group gap="xs" wrap="nowrap">
                <Button size="xs" variant="default" onClick={() => edit(r)} aria-label={t('office.editOf', { name: r.name || r.id })}>
                  {t('office.edit')}
                </Button>
                <Button
                  size="xs"
                  color="red"
                  variant="light"
                  onClick={() => {
                    // Name the trunk and what depends on it: the routes that list it (it leaves them) and the default.
                    const using = (routes.data?.data ?? []).filter((x) => x.trunkIds.includes(r.id)).map((x) => x.match);
                    const parts = [t('telephony.confirmDeleteTrunk', { name: r.name || r.id })];
                    if (using.length) parts.push(t('office.trunkUsedBy', { count: using.length, routes: using.join(', ') }));
                    if (settings.data?.defaultTrunkId === r.id) parts.push(t('office.isDefaultTrunk'));
                    ask({ message: parts.join(' '), confirm: t('common.delete'), onConfirm: () => remove.mutate({ id: r.id, force: using.length > 0 }) });
                  }}
                >
                  {t('common.delete')}
                </Button>
              </Group>
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
  const [ask, confirmation] = useConfirm();
  // A route may still list a trunk deleted elsewhere (an older database, the CLI): shown marked.
  const known = trunks.data ? new Set(trunks.data.trunks.map((x) => x.id)) : undefined;
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
      {confirmation}
      <Card withBorder>
        <Form onSubmit={() => create.mutate()} busy={create.isPending}>
          <Group align="flex-end">
            <TextInput
              label={t('telephony.prefix')}
              description="+49*, global"
              value={match}
              onChange={(e) => setMatch(e.currentTarget.value)}
              error={fieldError(create.error, 'match', match)}
            />
            <MultiSelect
              label={t('telephony.trunks')}
              data={(trunks.data?.trunks ?? []).map((x) => x.id)}
              value={ids}
              onChange={setIds}
              w={300}
              error={fieldError(create.error, 'trunkIds', ids)}
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
                    <Text size="sm" data-testid="route-trunk" td={known && !known.has(id) ? 'line-through' : undefined}>
                      {id}
                    </Text>
                    {known && !known.has(id) && (
                      <Badge color="red" size="sm" data-testid="route-trunk-deleted" aria-label={t('office.deletedTrunkOf', { id })}>
                        {t('office.deletedTrunk')}
                      </Badge>
                    )}
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
                    <ActionIcon
                      size="sm"
                      variant="subtle"
                      color="red"
                      disabled={r.trunkIds.length === 1}
                      onClick={() => update.mutate({ match: r.match, trunkIds: r.trunkIds.filter((x) => x !== id) })}
                      aria-label={t('office.removeTrunkFrom', { id, match: r.match })}
                    >
                      ×
                    </ActionIcon>
                  </Group>
                ))}
                {(trunks.data?.trunks ?? []).some((x) => !r.trunkIds.includes(x.id)) && (
                  <NativeSelect
                    size="xs"
                    w={200}
                    aria-label={t('office.addTrunkTo', { match: r.match })}
                    value=""
                    onChange={(e) => {
                      const add = e.currentTarget.value;
                      if (add) update.mutate({ match: r.match, trunkIds: [...r.trunkIds, add] });
                    }}
                    data={[
                      { value: '', label: `+ ${t('office.addTrunkTo', { match: r.match })}` },
                      ...(trunks.data?.trunks ?? []).filter((x) => !r.trunkIds.includes(x.id)).map((x) => ({ value: x.id, label: x.id })),
                    ]}
                  />
                )}
              </Stack>
            ),
          },
          {
            key: 'a',
            label: t('common.actions'),
            render: (r) => (
              <Button
                size="xs"
                color="red"
                variant="light"
                onClick={() =>
                  ask({
                    message: t('office.confirmDeleteRoute', { match: r.match, trunks: r.trunkIds.join(', ') }),
                    confirm: t('common.delete'),
                    onConfirm: () => remove.mutate(r.match),
                  })
                }
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
  const [ask, confirmation] = useConfirm();
  return (
    <Stack>
      {confirmation}
      <Card withBorder>
        <Form onSubmit={() => create.mutate()} busy={create.isPending}>
          <Group align="flex-end">
            <TextInput
              label="Did"
              description="+4930123*, anonymous, *"
              value={f.did}
              onChange={(e) => setF({ ...f, did: e.currentTarget.value })}
              error={fieldError(create.error, 'did', f.did)}
            />
            <TextInput
              label={t('telephony.fromNumber')}
              value={f.fromNumber}
              onChange={(e) => setF({ ...f, fromNumber: e.currentTarget.value })}
              error={fieldError(create.error, 'fromNumber', f.fromNumber)}
            />
            <TextInput
              label={t('telephony.target')}
              value={f.user}
              onChange={(e) => setF({ ...f, user: e.currentTarget.value })}
              error={fieldError(create.error, 'user', f.user)}
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
              <Button
                size="xs"
                color="red"
                variant="light"
                onClick={() =>
                  ask({
                    message: t('office.confirmDeleteInbound', { did: r.fromNumber ? `${r.did} (${r.fromNumber})` : r.did, user: r.user }),
                    confirm: t('common.delete'),
                    onConfirm: () => remove.mutate(r),
                  })
                }
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

function Numbers() {
  const { t } = useTranslation();
  const label = useLabel();
  const qc = useQueryClient();
  const list = useQuery({ queryKey: ['numbers'], queryFn: () => call(api.GET('/signal.ashx?numbers=list', { params: { query: { numbers: 'list' } } })) });
  const [f, setF] = useState({ number: '', name: '', systemPrompt: '' });
  // The settings the CLI had alone, apart from the first fields; saveTranscripts is kept as the row has it.
  const MORE = {
    voice: 'Aoede' as (typeof VOICES)[number],
    language: 'en-US',
    visibility: 'signed-in' as 'signed-in' | 'public',
    maxDurationSec: 3500,
    saveTranscripts: true,
  };
  const [more, setMore] = useState(MORE);
  const [editing, setEditing] = useState<string>();
  const [ask, confirmation] = useConfirm();
  const inbound = useQuery({ queryKey: ['routes', 'in'], queryFn: () => call(api.GET('/api.ashx/v1/inbound-routes', { params: { query: { limit: 500 } } })) });
  const stopEditing = () => {
    setEditing(undefined);
    setF({ number: '', name: '', systemPrompt: '' });
    setMore(MORE);
  };
  const save = useMutation({
    mutationFn: () =>
      call(
        api.POST('/signal.ashx?numbers=save', {
          params: { query: { numbers: 'save' } },
          body: { ...f, ...more, ...(editing ? { number: editing } : {}) } as Body<'/signal.ashx?numbers=save', 'post'>,
        }),
      ),
    onSuccess: () => {
      if (editing) stopEditing();
      void qc.invalidateQueries({ queryKey: ['numbers'] });
    },
  });
  const remove = useMutation({
    mutationFn: (number: string) => call(api.POST('/signal.ashx?numbers=remove', { params: { query: { numbers: 'remove' } }, body: { number } })),
    onSuccess: () => qc.invalidateQueries({ queryKey: ['numbers'] }),
  });
  return (
    <Stack>
      {confirmation}
      <Card withBorder>
        <Form onSubmit={() => save.mutate()} busy={save.isPending}>
          <Group align="flex-end">
            <TextInput
              label={t('telephony.number')}
              value={f.number}
              readOnly={!!editing}
              onChange={(e) => setF({ ...f, number: e.currentTarget.value })}
              error={fieldError(save.error, 'number', f.number)}
            />
            <TextInput label={t('telephony.name')} value={f.name} onChange={(e) => setF({ ...f, name: e.currentTarget.value })} />
            <TextInput label={t('calls.prompt')} value={f.systemPrompt} onChange={(e) => setF({ ...f, systemPrompt: e.currentTarget.value })} w={360} />
          </Group>
          <Group align="flex-end" mt="sm">
            <NativeSelect
              label={t('office.voice')}
              value={more.voice}
              data={[...VOICES]}
              onChange={(e) => setMore({ ...more, voice: e.currentTarget.value as (typeof VOICES)[number] })}
            />
            <TextInput
              label={t('office.language')}
              description="de-DE, en-US"
              value={more.language}
              onChange={(e) => setMore({ ...more, language: e.currentTarget.value })}
              error={fieldError(save.error, 'language', more.language)}
              w={140}
            />
            <NativeSelect
              label={t('telephony.visibility')}
              value={more.visibility}
              data={(['signed-in', 'public'] as const).map((v) => ({ value: v, label: label('telephony.visibilities', v) }))}
              onChange={(e) => setMore({ ...more, visibility: e.currentTarget.value as 'signed-in' | 'public' })}
            />
            <NumberInput
              label={t('office.maxDuration')}
              min={10}
              max={14400}
              value={more.maxDurationSec}
              onChange={(v) => setMore({ ...more, maxDurationSec: Number(v) })}
              error={fieldError(save.error, 'maxDurationSec', more.maxDurationSec)}
              w={180}
            />
            <Button type="submit" loading={save.isPending}>
              {editing ? t('office.saveChanges') : t('common.save')}
            </Button>
            {editing && (
              <Button variant="default" onClick={stopEditing}>
                {t('office.cancelEdit')}
              </Button>
            )}
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
          { key: 'voice', label: t('office.voice'), render: (r) => `${r.voice} · ${r.language} · ${r.maxDurationSec} s` },
          {
            key: 'a',
            label: t('common.actions'),
            render: (r) => (
              <Group gap="xs" wrap="nowrap">
                <Button
                  size="xs"
                  variant="default"
                  aria-label={t('office.editOf', { name: r.number })}
                  onClick={() => {
                    setEditing(r.number);
                    setF({ number: r.number, name: r.name, systemPrompt: r.systemPrompt });
                    setMore({ ...MORE, ...fromRow(MORE, r) });
                  }}
                >
                  {t('office.edit')}
                </Button>
                <Button
                  size="xs"
                  color="red"
                  variant="light"
                  onClick={() => {
                    // Name the number and the inbound routes that send callers to it.
                    const using = (inbound.data?.data ?? []).filter((x) => x.user === r.number).map((x) => x.did);
                    const parts = [t('office.confirmDeleteNumber', { number: r.number })];
                    if (using.length) parts.push(t('office.numberUsedBy', { count: using.length, routes: using.join(', ') }));
                    ask({ message: parts.join(' '), confirm: t('common.delete'), onConfirm: () => remove.mutate(r.number) });
                  }}
                >
                  {t('common.delete')}
                </Button>
              </Group>
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
  const [ask, confirmation] = useConfirm();
  const add = useMutation({
    mutationFn: () => call(api.POST('/signal.ashx?whitelist=add', { params: { query: { whitelist: 'add' } }, body: { number, comment } })),
    onSuccess: (r) => {
      // A listed number keeps its place and takes the new comment: say which happened.
      const flags = r as { added?: boolean; updated?: boolean };
      const key = flags.added ? 'office.whitelistAdded' : flags.updated ? 'office.whitelistUpdated' : 'office.whitelistUnchanged';
      notifications.show({ color: 'teal', message: t(key, { number }), closeButtonProps: { 'aria-label': t('common.close') } });
      void qc.invalidateQueries({ queryKey: ['whitelist'] });
    },
  });
  const remove = useMutation({
    mutationFn: (n: string) => call(api.POST('/signal.ashx?whitelist=remove', { params: { query: { whitelist: 'remove' } }, body: { number: n } })),
    onSuccess: () => qc.invalidateQueries({ queryKey: ['whitelist'] }),
  });
  return (
    <Stack>
      {confirmation}
      <Card withBorder>
        <Form onSubmit={() => add.mutate()} busy={add.isPending}>
          <Group align="flex-end">
            <TextInput
              label={t('telephony.number')}
              value={number}
              onChange={(e) => setNumber(e.currentTarget.value)}
              error={fieldError(add.error, 'number', number)}
            />
            <TextInput label={t('telephony.comment')} value={comment} onChange={(e) => setComment(e.currentTarget.value)} />
            <Button type="submit" loading={add.isPending}>
              {t('common.add')}
            </Button>
          </Group>
        </Form>
      </Card>
      <ErrorNote error={list.error ?? remove.error ?? (add.error && !(add.error as { field?: string }).field ? add.error : undefined)} />
      <DataTable
        caption={t('telephony.whitelist')}
        rows={list.data}
        loading={list.isLoading}
        rowKey={(r) => r.number}
        columns={[
          { key: 'n', label: t('telephony.number'), render: (r) => r.number },
          { key: 'c', label: t('telephony.comment'), render: (r) => r.comment },
          { key: 'when', label: t('common.created'), render: (r) => when(r.addedAtUtc) },
          {
            key: 'a',
            label: t('common.actions'),
            render: (r) => (
              <Button
                size="xs"
                color="red"
                variant="light"
                aria-label={t('office.removeOf', { name: r.number })}
                onClick={() =>
                  ask({
                    message: t('office.confirmWhitelistRemove', { number: r.number }),
                    confirm: t('office.remove'),
                    onConfirm: () => remove.mutate(r.number),
                  })
                }
              >
                {t('office.remove')}
              </Button>
            ),
          },
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
            error={fieldError(save.error, 'defaultTrunkId', f.defaultTrunkId ?? c?.defaultTrunkId ?? null)}
          />
          <TextInput
            label={t('telephony.engineKey')}
            description={c?.hasEngineApiKey ? t('telephony.engineKeySet') : t('telephony.engineKeyUnset')}
            type="password"
            autoComplete="off"
            value={f.engineApiKey ?? ''}
            onChange={(e) => setF({ ...f, engineApiKey: e.currentTarget.value })}
            error={fieldError(save.error, 'engineApiKey', f.engineApiKey ?? '')}
          />
          <TextInput
            label={t('telephony.model')}
            value={f.model ?? c?.model ?? ''}
            onChange={(e) => setF({ ...f, model: e.currentTarget.value })}
            error={fieldError(save.error, 'model', f.model ?? c?.model ?? '')}
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
          <Tabs.Tab value="phones">{t('telephony.phones')}</Tabs.Tab>
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
        <Tabs.Panel value="phones" pt="md">
          <DeskPhoneTls />
        </Tabs.Panel>
      </Tabs>
    </Page>
  );
}
