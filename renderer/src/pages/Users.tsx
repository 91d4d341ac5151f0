import { Badge, Button, Card, Group, NativeSelect, Select, Stack, Tabs, TextInput } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { useTranslation } from 'react-i18next';
import { api, call, type Body } from '../api/client.ts';
import { when } from '../i18n.ts';
import { useConfirm } from '../components/dialogs.tsx';
import { atField, DataTable, ErrorNote, fieldError, Form, OnceSecret, Page, useLabel } from '../components/ui.tsx';

const ROLES = ['user', 'admin'] as const;
/** The languages of the mails the appliance sends an account (none: the request's language). */
const MAIL_LANGUAGES = ['en', 'de'] as const;
type MailLanguage = (typeof MAIL_LANGUAGES)[number];

function UserList() {
  const { t } = useTranslation();
  const qc = useQueryClient();
  const list = useQuery({ queryKey: ['users'], queryFn: () => call(api.GET('/api.ashx/v1/users', { params: { query: { limit: 200 } } })) });
  const label = useLabel();
  const [ask, confirmation] = useConfirm();
  const [f, setF] = useState({ name: '', email: '', role: 'user' as 'user' | 'admin', language: '' as MailLanguage | '' });
  const [password, setPassword] = useState<string>();
  const add = useMutation({
    mutationFn: () =>
      call(
        api.POST('/api.ashx/v1/users', {
          params: { query: {} },
          body: { name: f.name, role: f.role, email: f.email || null, language: f.language || null, generatePassword: true },
        }),
      ),
    onSuccess: (r) => {
      setPassword(r.password);
      void qc.invalidateQueries({ queryKey: ['users'] });
    },
  });
  const toggle = useMutation({
    mutationFn: (u: { id: string; status: string }) =>
      u.status === 'disabled'
        ? call(api.POST('/api.ashx/v1/users/{id}/enable', { params: { path: { id: u.id }, query: {} } }))
        : call(api.POST('/api.ashx/v1/users/{id}/disable', { params: { path: { id: u.id }, query: {} } })),
    onSuccess: () => qc.invalidateQueries({ queryKey: ['users'] }),
  });
  const setRole = useMutation({
    mutationFn: (u: { id: string; role: 'user' | 'admin' }) =>
      call(api.PATCH('/api.ashx/v1/users/{id}', { params: { path: { id: u.id }, query: {} }, body: { role: u.role } })),
    onSuccess: () => qc.invalidateQueries({ queryKey: ['users'] }),
  });
  const setLanguage = useMutation({
    mutationFn: (u: { id: string; language: MailLanguage | null }) =>
      call(api.PATCH('/api.ashx/v1/users/{id}', { params: { path: { id: u.id }, query: {} }, body: { language: u.language } })),
    onSuccess: () => qc.invalidateQueries({ queryKey: ['users'] }),
  });
  const languages = [{ value: '', label: t('users.languages.auto') }, ...MAIL_LANGUAGES.map((l) => ({ value: l, label: t(`users.languages.${l}`) }))];
  const [reset, setReset] = useState<{ name: string; password: string }>();
  const resetPassword = useMutation({
    mutationFn: (u: { id: string; name: string }) =>
      call(api.POST('/api.ashx/v1/users/{id}/password', { params: { path: { id: u.id }, query: {} }, body: {} })).then((r) => ({
        name: u.name,
        password: r.password ?? '',
      })),
    onSuccess: (r) => setReset(r),
  });
  return (
    <Stack>
      {confirmation}
      <Card withBorder>
        <Form onSubmit={() => add.mutate()} busy={add.isPending}>
          <Group align="flex-end">
            <TextInput
              label={t('users.name')}
              value={f.name}
              onChange={(e) => setF({ ...f, name: e.currentTarget.value })}
              error={fieldError(add.error, 'name', f.name)}
            />
            <TextInput
              label={t('users.email')}
              type="email"
              value={f.email}
              onChange={(e) => setF({ ...f, email: e.currentTarget.value })}
              error={fieldError(add.error, 'email', f.email)}
            />
            <Select
              label={t('users.role')}
              data={['user', 'admin']}
              value={f.role}
              onChange={(v) => setF({ ...f, role: (v ?? 'user') as 'user' | 'admin' })}
              w={120}
            />
            <NativeSelect
              label={t('users.language')}
              data={languages}
              value={f.language}
              onChange={(e) => setF({ ...f, language: e.currentTarget.value as MailLanguage | '' })}
              error={fieldError(add.error, 'language', f.language)}
            />
            <Button type="submit" loading={add.isPending}>
              {t('common.add')}
            </Button>
          </Group>
        </Form>
        {password && <OnceSecret label={t('users.password')} value={password} />}
      </Card>
      {reset && <OnceSecret label={t('users.newPasswordOf', { name: reset.name })} value={reset.password} />}
      <ErrorNote
        error={
          list.error ??
          toggle.error ??
          setRole.error ??
          setLanguage.error ??
          resetPassword.error ??
          (add.error && !(add.error as { field?: string }).field ? add.error : undefined)
        }
      />
      <DataTable
        caption={t('nav.users')}
        rows={list.data?.data}
        loading={list.isLoading}
        rowKey={(u) => u.id}
        columns={[
          { key: 'name', label: t('users.name'), render: (u) => u.name },
          { key: 'email', label: t('users.email'), render: (u) => u.email ?? '' },
          {
            key: 'role',
            label: t('users.role'),
            render: (u) => (
              <NativeSelect
                size="xs"
                aria-label={t('users.roleOf', { name: u.name })}
                value={u.role}
                onChange={(e) => {
                  const role = e.currentTarget.value as 'user' | 'admin';
                  ask({
                    message: t('users.confirmRole', { name: u.name, role: label('users.roles', role) }),
                    confirm: t('users.changeRole'),
                    color: 'indigo',
                    onConfirm: () => setRole.mutate({ id: u.id, role }),
                  });
                }}
                data={ROLES.map((r) => ({ value: r, label: label('users.roles', r) }))}
              />
            ),
          },
          {
            key: 'language',
            label: t('users.language'),
            render: (u) => (
              <NativeSelect
                size="xs"
                aria-label={t('users.languageOf', { name: u.name })}
                value={u.language ?? ''}
                onChange={(e) => setLanguage.mutate({ id: u.id, language: (e.currentTarget.value || null) as MailLanguage | null })}
                data={languages}
              />
            ),
          },
          {
            key: 'status',
            label: t('users.status'),
            render: (u) => <Badge color={u.status === 'active' ? 'teal' : 'gray'}>{label('users.statuses', u.status)}</Badge>,
          },
          {
            key: 'a',
            label: t('common.actions'),
            render: (u) => (
              <Group gap="xs" wrap="nowrap">
                <Button
                  size="xs"
                  variant="light"
                  color={u.status === 'disabled' ? 'teal' : 'red'}
                  data-testid="user-toggle"
                  onClick={() =>
                    u.status === 'disabled'
                      ? toggle.mutate(u)
                      : ask({ message: t('users.confirmDisable', { name: u.name }), confirm: t('users.disable'), onConfirm: () => toggle.mutate(u) })
                  }
                >
                  {u.status === 'disabled' ? t('users.enable') : t('users.disable')}
                </Button>
                <Button
                  size="xs"
                  variant="default"
                  onClick={() =>
                    ask({ message: t('users.confirmReset', { name: u.name }), confirm: t('users.resetPassword'), onConfirm: () => resetPassword.mutate(u) })
                  }
                  aria-label={t('users.resetPasswordOf', { name: u.name })}
                >
                  {t('users.resetPassword')}
                </Button>
              </Group>
            ),
          },
        ]}
      />
    </Stack>
  );
}

function ApiKeys() {
  const { t } = useTranslation();
  const qc = useQueryClient();
  const list = useQuery({ queryKey: ['apikeys'], queryFn: () => call(api.GET('/api.ashx/v1/apikeys', { params: { query: { limit: 200 } } })) });
  const [ask, confirmation] = useConfirm();
  const [name, setName] = useState('');
  const [key, setKey] = useState<string>();
  // An admin may mint a key for another user of the tenant (a CRM connector's own account); empty = themselves.
  const [user, setUser] = useState('');
  const users = useQuery({ queryKey: ['users'], queryFn: () => call(api.GET('/api.ashx/v1/users', { params: { query: { limit: 200 } } })) });
  const mint = useMutation({
    mutationFn: () =>
      call(api.POST('/signal.ashx?apikey-create=1', { params: { query: { 'apikey-create': '1' } }, body: { name, ...(user ? { user } : {}) } })),
    onSuccess: (r) => {
      setKey(r.key);
      void qc.invalidateQueries({ queryKey: ['apikeys'] });
    },
  });
  const revoke = useMutation({
    mutationFn: (id: string) => call(api.POST('/api.ashx/v1/apikeys/{id}/revoke', { params: { path: { id }, query: {} } })),
    onSuccess: () => qc.invalidateQueries({ queryKey: ['apikeys'] }),
  });
  return (
    <Stack>
      {confirmation}
      <Card withBorder>
        <Form onSubmit={() => mint.mutate()} busy={mint.isPending}>
          <Group align="flex-end">
            <TextInput label={t('keys.name')} value={name} onChange={(e) => setName(e.currentTarget.value)} error={fieldError(mint.error, 'name', name)} />
            <NativeSelect
              label={t('office.keyFor')}
              value={user}
              onChange={(e) => setUser(e.currentTarget.value)}
              data={[{ value: '', label: '—' }, ...(users.data?.data ?? []).map((u) => ({ value: u.name, label: u.name }))]}
              error={fieldError(mint.error, 'user', user)}
            />
            <Button type="submit" loading={mint.isPending} data-testid="mint-key">
              {t('keys.create')}
            </Button>
          </Group>
        </Form>
        {key && <OnceSecret label={t('keys.key')} value={key} />}
      </Card>
      <ErrorNote error={list.error ?? revoke.error ?? (mint.error && !(mint.error as { field?: string }).field ? mint.error : undefined)} />
      <DataTable
        caption={t('users.keys')}
        rows={list.data?.data}
        loading={list.isLoading}
        rowKey={(k) => k.id}
        columns={[
          { key: 'id', label: 'ID', render: (k) => k.id },
          { key: 'name', label: t('keys.name'), render: (k) => k.name },
          { key: 'user', label: t('users.name'), render: (k) => k.userName },
          { key: 'created', label: t('common.created'), render: (k) => when(k.createdAtUtc) },
          {
            key: 'status',
            label: t('users.status'),
            render: (k) => <Badge color={k.revokedAtUtc ? 'gray' : 'teal'}>{k.revokedAtUtc ? t('common.revoked') : t('keys.active')}</Badge>,
          },
          {
            key: 'a',
            label: t('common.actions'),
            render: (k) =>
              !k.revokedAtUtc && (
                <Button
                  size="xs"
                  variant="light"
                  color="red"
                  onClick={() =>
                    ask({ message: t('keys.confirmRevoke', { name: k.name || k.id }), confirm: t('common.revoke'), onConfirm: () => revoke.mutate(k.id) })
                  }
                  data-testid={`revoke-${k.id}`}
                >
                  {t('common.revoke')}
                </Button>
              ),
          },
        ]}
      />
    </Stack>
  );
}

function Clients() {
  const { t } = useTranslation();
  const qc = useQueryClient();
  const list = useQuery({ queryKey: ['clients'], queryFn: () => call(api.GET('/signal.ashx?oidc-clients=1', { params: { query: { 'oidc-clients': '1' } } })) });
  const [f, setF] = useState({ client_id: '', redirect: '' });
  const [secret, setSecret] = useState<string>();
  // Editing keeps the client's other metadata (the save is an upsert of the whole client): its row, with the redirect URI changed.
  const [editing, setEditing] = useState<Record<string, unknown>>();
  const save = useMutation({
    mutationFn: () => {
      // The row's metadata as the save takes it: without what the server keeps itself (flags, times) and without nulls.
      const base = editing
        ? Object.fromEntries(Object.entries(editing).filter(([k, v]) => v !== null && !['builtin', 'has_secret', 'created_at', 'updated_at'].includes(k)))
        : { token_endpoint_auth_method: 'client_secret_basic' };
      const rest = editing && Array.isArray(editing.redirect_uris) ? (editing.redirect_uris as string[]).slice(1) : [];
      return call(
        api.POST('/signal.ashx?oidc-clients-save=1', {
          params: { query: { 'oidc-clients-save': '1' } },
          body: { ...base, client_id: f.client_id, redirect_uris: f.redirect ? [f.redirect, ...rest] : rest } as Body<
            '/signal.ashx?oidc-clients-save=1',
            'post'
          >,
        }),
      );
    },
    onSuccess: (r) => {
      setSecret(r.client_secret);
      setEditing(undefined);
      void qc.invalidateQueries({ queryKey: ['clients'] });
    },
  });
  // The API names the URI it refused as redirect_uris[i]; the form has one redirect field.
  const redirectError = fieldError(save.error, 'redirect_uris[0]', f.redirect, ['invalid_redirect_uri']) ?? fieldError(save.error, 'redirect_uris', f.redirect);
  return (
    <Stack>
      <Card withBorder>
        <Form onSubmit={() => save.mutate()} busy={save.isPending}>
          <Group align="flex-end">
            <TextInput
              label="client_id"
              value={f.client_id}
              readOnly={!!editing}
              onChange={(e) => setF({ ...f, client_id: e.currentTarget.value })}
              error={fieldError(save.error, 'client_id', f.client_id)}
            />
            <TextInput
              label={t('clients.redirect')}
              value={f.redirect}
              onChange={(e) => setF({ ...f, redirect: e.currentTarget.value })}
              w={360}
              error={redirectError}
            />
            <Button type="submit" loading={save.isPending}>
              {editing ? t('office.saveChanges') : t('common.save')}
            </Button>
            {editing && (
              <Button
                variant="default"
                onClick={() => {
                  setEditing(undefined);
                  setF({ client_id: '', redirect: '' });
                }}
              >
                {t('office.cancelEdit')}
              </Button>
            )}
          </Group>
        </Form>
        {secret && <OnceSecret label={t('clients.secret')} value={secret} />}
      </Card>
      {/* A refused field the form has no input for (grant_types, jwks of a client saved elsewhere) is said here, not dropped. */}
      <ErrorNote
        error={list.error ?? (atField(save.error, ['client_id', 'redirect_uris[0]', 'redirect_uris'], ['invalid_redirect_uri']) ? undefined : save.error)}
      />
      <DataTable
        caption={t('users.clients')}
        rows={list.data}
        loading={list.isLoading}
        rowKey={(c) => c.client_id}
        columns={[
          { key: 'id', label: 'client_id', render: (c) => c.client_id },
          // eslint-disable-next-line @typescript-eslint/no-base-to-string -- client_name is a string in the API; shown as it prints
          { key: 'name', label: t('users.name'), render: (c) => String((c as Record<string, unknown>).client_name ?? '') },
          {
            key: 'redirect',
            label: t('clients.redirect'),
            render: (c) => ((c as Record<string, unknown>).redirect_uris as string[] | undefined)?.join(' ') ?? '',
          },
          {
            key: 'a',
            label: t('common.actions'),
            render: (c) =>
              !(c as Record<string, unknown>).builtin && (
                <Button
                  size="xs"
                  variant="default"
                  aria-label={t('office.editOf', { name: c.client_id })}
                  onClick={() => {
                    const row = c as Record<string, unknown>;
                    setEditing(row);
                    setF({ client_id: c.client_id, redirect: ((row.redirect_uris as string[] | undefined) ?? [])[0] ?? '' });
                  }}
                >
                  {t('office.edit')}
                </Button>
              ),
          },
        ]}
      />
    </Stack>
  );
}

export default function Users() {
  const { t } = useTranslation();
  return (
    <Page title={t('nav.users')}>
      <Tabs defaultValue="users" keepMounted={false}>
        <Tabs.List>
          <Tabs.Tab value="users">{t('nav.users')}</Tabs.Tab>
          <Tabs.Tab value="keys">{t('users.keys')}</Tabs.Tab>
          <Tabs.Tab value="clients">{t('users.clients')}</Tabs.Tab>
        </Tabs.List>
        <Tabs.Panel value="users" pt="md">
          <UserList />
        </Tabs.Panel>
        <Tabs.Panel value="keys" pt="md">
          <ApiKeys />
        </Tabs.Panel>
        <Tabs.Panel value="clients" pt="md">
          <Clients />
        </Tabs.Panel>
      </Tabs>
    </Page>
  );
}
