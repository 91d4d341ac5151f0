import { Anchor, Badge, Button, Card, Group, NavLink, Paper, ScrollArea, Stack, Text, Textarea, TextInput, Title } from '@mantine/core';
import { useDisclosure } from '@mantine/hooks';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useRef, useState } from 'react';
import { useTranslation } from 'react-i18next';
import { accessToken } from '../auth.ts';
import { api, ApiError, call } from '../api/client.ts';
import { when } from '../i18n.ts';
import { Dialog } from '../components/dialogs.tsx';
import { ErrorNote, atField, fieldError, Form, Page, usePhone } from '../components/ui.tsx';

interface Frame {
  type: string;
  seq?: number;
  threadId?: string;
  user?: string;
}

/**
 * The chat socket (plugins/chat README "Socket protocol"): a one-time ticket in the URL (a browser
 * cannot set headers on a WebSocket; the access token never goes into a URL), resume with
 * `since=<last seq>` after any close, so nothing is lost; frames make the views fetch again.
 */
function useChatSocket(onFrame: (f: Frame) => void): boolean {
  const [up, setUp] = useState(false);
  const frameRef = useRef(onFrame);
  // eslint-disable-next-line react-hooks/refs -- the latest-callback ref: the socket effect calls the current handler without reconnecting on each render
  frameRef.current = onFrame;
  useEffect(() => {
    let stopped = false;
    let ws: WebSocket | undefined;
    let since: number | undefined;
    let delay = 500;
    const connect = async () => {
      if (stopped) return;
      try {
        const { ticket } = await call(api.POST('/chat.ashx?op=socket-ticket', { params: { query: { op: 'socket-ticket' } } }));
        const q = new URLSearchParams({ op: 'socket', ticket });
        if (since !== undefined) q.set('since', String(since));
        ws = new WebSocket(`${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/chat.ashx?${q}`);
        ws.onopen = () => {
          setUp(true);
          delay = 500;
        };
        ws.onmessage = (m) => {
          const f = JSON.parse(String(m.data)) as Frame & { head?: number };
          if (f.type === 'hello' && since === undefined) since = f.head;
          if (f.type === 'resync') since = f.head;
          if (typeof f.seq === 'number') since = Math.max(since ?? 0, f.seq);
          frameRef.current(f);
        };
        ws.onclose = () => {
          setUp(false);
          if (!stopped) setTimeout(() => void connect(), (delay = Math.min(delay * 2, 10_000)));
        };
      } catch {
        setTimeout(() => void connect(), (delay = Math.min(delay * 2, 10_000)));
      }
    };
    void connect();
    return () => {
      stopped = true;
      ws?.close();
    };
  }, []);
  return up;
}

async function upload(threadId: string, file: File): Promise<void> {
  const form = new FormData();
  form.append('file', file, file.name);
  const token = await accessToken();
  const r = await fetch(`/chat.ashx?op=upload&threadId=${encodeURIComponent(threadId)}`, {
    method: 'POST',
    headers: token ? { Authorization: `Bearer ${token}` } : {},
    body: form,
  });
  if (!r.ok) {
    const b = (await r.json().catch(() => ({}))) as { error?: string; error_description?: string };
    throw new ApiError(r.status, b.error ?? 'error', b.error_description ?? `HTTP ${r.status}`);
  }
}

/** Downloads with the bearer (a plain link would carry no credential) and saves under the shown name. */
async function download(sha: string, name: string): Promise<void> {
  const token = await accessToken();
  const r = await fetch(`/chat.ashx?op=download&sha=${sha}`, { headers: token ? { Authorization: `Bearer ${token}` } : {} });
  if (!r.ok) throw new ApiError(r.status, 'error', `download answered ${r.status}`);
  const url = URL.createObjectURL(await r.blob());
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

function Thread({ threadId, me }: { threadId: string; me: string }) {
  const { t } = useTranslation();
  const qc = useQueryClient();
  const [text, setText] = useState('');
  const [dragging, setDragging] = useState(false);
  const history = useQuery({
    queryKey: ['chat', 'history', threadId],
    queryFn: () => call(api.GET('/chat.ashx?op=history', { params: { query: { op: 'history', threadId, limit: 100 } } })),
  });
  const messages = history.data?.messages ?? [];
  const last = messages.at(-1)?.id;
  useEffect(() => {
    if (last === undefined) return;
    void call(api.POST('/chat.ashx?op=read', { params: { query: { op: 'read', threadId } }, body: { upTo: last } })).then(() =>
      qc.invalidateQueries({ queryKey: ['chat', 'threads'] }),
    );
  }, [last, threadId, qc]);
  const send = useMutation({
    mutationFn: () => call(api.POST('/chat.ashx?op=send', { params: { query: { op: 'send', threadId } }, body: { text } })),
    onSuccess: () => {
      setText('');
      void qc.invalidateQueries({ queryKey: ['chat', 'history', threadId] });
    },
  });
  const put = useMutation({
    mutationFn: (f: File) => upload(threadId, f),
    onSuccess: () => qc.invalidateQueries({ queryKey: ['chat', 'history', threadId] }),
  });
  const get = useMutation({ mutationFn: (f: { sha: string; name: string }) => download(f.sha, f.name) });
  return (
    <Paper
      withBorder
      p="sm"
      data-testid="chat-thread"
      style={dragging ? { outline: '2px dashed var(--mantine-color-indigo-6)' } : undefined}
      onDragOver={(e) => {
        e.preventDefault();
        setDragging(true);
      }}
      onDragLeave={() => setDragging(false)}
      onDrop={(e) => {
        e.preventDefault();
        setDragging(false);
        for (const f of Array.from(e.dataTransfer.files)) put.mutate(f);
      }}
    >
      <ScrollArea h={380}>
        <Stack gap={6}>
          {messages.map((m) => (
            <Stack key={m.id} gap={0} align={m.sender.login === me ? 'flex-end' : 'flex-start'}>
              <Text size="xs" c="dimmed">
                {m.sender.login} · {when(m.createdAt)}
              </Text>
              {m.deleted ? (
                <Text size="sm" fs="italic" c="dimmed">
                  {t('chat.deleted')}
                </Text>
              ) : m.file ? (
                <Anchor component="button" type="button" size="sm" onClick={() => get.mutate({ sha: m.file!.sha, name: m.file!.name })} data-testid="chat-file">
                  {m.file.name} ({Math.ceil(m.file.size / 1024)} KB)
                </Anchor>
              ) : (
                // Plain text, never HTML (React escapes it).
                <Text size="sm" style={{ whiteSpace: 'pre-wrap' }} data-testid="chat-message">
                  {m.text}
                </Text>
              )}
            </Stack>
          ))}
        </Stack>
      </ScrollArea>
      <ErrorNote error={history.error ?? put.error ?? get.error} />
      <Form
        onSubmit={() => {
          if (text.trim()) send.mutate();
        }}
        busy={send.isPending}
      >
        <Group align="flex-end" mt="sm">
          <Textarea
            label={t('chat.message')}
            autosize
            minRows={1}
            maxRows={5}
            style={{ flex: 1 }}
            value={text}
            onChange={(e) => setText(e.currentTarget.value)}
            onKeyDown={(e) => {
              if (e.key === 'Enter' && !e.shiftKey) {
                e.preventDefault();
                if (text.trim()) send.mutate();
              }
            }}
            error={fieldError(send.error, 'text', text)}
          />
          <Button type="submit" loading={send.isPending}>
            {t('chat.send')}
          </Button>
          <Button component="label" variant="default" loading={put.isPending}>
            {t('chat.attach')}
            <input type="file" hidden onChange={(e) => e.currentTarget.files?.[0] && put.mutate(e.currentTarget.files[0])} data-testid="chat-upload" />
          </Button>
        </Group>
      </Form>
      <Text size="xs" c="dimmed" mt={4}>
        {t('chat.dropHint')}
      </Text>
    </Paper>
  );
}

function NewConversation({ onOpened }: { onOpened: (threadId: string) => void }) {
  const { t } = useTranslation();
  const qc = useQueryClient();
  const [peer, setPeer] = useState('');
  const [first, setFirst] = useState('');
  const [group, setGroup] = useState({ name: '', members: '' });
  const direct = useMutation({
    // A direct conversation begins with its first message (the server makes the thread then).
    mutationFn: () => call(api.POST('/chat.ashx?op=send', { params: { query: { op: 'send', with: peer } }, body: { text: first } })),
    onSuccess: (r) => {
      void qc.invalidateQueries({ queryKey: ['chat', 'threads'] });
      onOpened(r.threadId);
    },
  });
  const create = useMutation({
    mutationFn: () =>
      call(
        api.POST('/chat.ashx?op=group-create', {
          params: { query: { op: 'group-create' } },
          body: {
            name: group.name,
            members: group.members
              .split(',')
              .map((x) => x.trim())
              .filter(Boolean),
          },
        }),
      ),
    onSuccess: (g) => {
      void qc.invalidateQueries({ queryKey: ['chat', 'threads'] });
      onOpened(g.id);
    },
  });
  return (
    <Stack>
      <Form onSubmit={() => direct.mutate()} busy={direct.isPending}>
        <Group align="flex-end">
          <TextInput label={t('chat.peer')} value={peer} onChange={(e) => setPeer(e.currentTarget.value)} error={fieldError(direct.error, 'with', peer)} />
          <TextInput
            label={t('chat.firstMessage')}
            value={first}
            onChange={(e) => setFirst(e.currentTarget.value)}
            error={fieldError(direct.error, 'text', first)}
          />
          <Button type="submit" loading={direct.isPending}>
            {t('chat.open')}
          </Button>
        </Group>
      </Form>
      <Form onSubmit={() => create.mutate()} busy={create.isPending}>
        <Group align="flex-end">
          <TextInput
            label={t('chat.groupName')}
            value={group.name}
            onChange={(e) => setGroup({ ...group, name: e.currentTarget.value })}
            error={fieldError(create.error, 'name', group.name)}
          />
          <TextInput
            label={t('chat.members')}
            value={group.members}
            onChange={(e) => setGroup({ ...group, members: e.currentTarget.value })}
            error={fieldError(create.error, 'members', group.members)}
          />
          <Button type="submit" loading={create.isPending}>
            {t('chat.createGroup')}
          </Button>
        </Group>
      </Form>
      <ErrorNote
        error={
          (direct.error && !atField(direct.error, ['with']) ? direct.error : undefined) ??
          (create.error && !(create.error as { field?: string }).field ? create.error : undefined)
        }
      />
    </Stack>
  );
}

function GroupAdmin({ groupId, name, onLeft }: { groupId: string; name: string; onLeft: () => void }) {
  const { t } = useTranslation();
  const qc = useQueryClient();
  const [rename, setRename] = useState(name);
  const [add, setAdd] = useState('');
  const refresh = () => qc.invalidateQueries({ queryKey: ['chat', 'threads'] });
  const doRename = useMutation({
    mutationFn: () => call(api.POST('/chat.ashx?op=group-rename', { params: { query: { op: 'group-rename', groupId } }, body: { name: rename } })),
    onSuccess: refresh,
  });
  const doAdd = useMutation({
    mutationFn: () => call(api.POST('/chat.ashx?op=group-add', { params: { query: { op: 'group-add', groupId } }, body: { members: [add] } })),
    onSuccess: () => {
      setAdd('');
      void refresh();
    },
  });
  const leave = useMutation({
    mutationFn: () => call(api.POST('/chat.ashx?op=leave', { params: { query: { op: 'leave', groupId } } })),
    onSuccess: () => {
      void refresh();
      onLeft();
    },
  });
  return (
    <Stack>
      <Form onSubmit={() => doRename.mutate()} busy={doRename.isPending}>
        <Group align="flex-end">
          <TextInput label={t('chat.groupName')} value={rename} onChange={(e) => setRename(e.currentTarget.value)} />
          <Button type="submit" loading={doRename.isPending}>
            {t('chat.rename')}
          </Button>
        </Group>
      </Form>
      <Form onSubmit={() => doAdd.mutate()} busy={doAdd.isPending}>
        <Group align="flex-end">
          <TextInput label={t('chat.addMember')} value={add} onChange={(e) => setAdd(e.currentTarget.value)} />
          <Button type="submit" loading={doAdd.isPending}>
            {t('common.add')}
          </Button>
        </Group>
      </Form>
      <Button color="red" variant="light" onClick={() => leave.mutate()}>
        {t('chat.leave')}
      </Button>
      <ErrorNote error={doRename.error ?? doAdd.error ?? leave.error} />
    </Stack>
  );
}

export default function Chat() {
  const { t } = useTranslation();
  const qc = useQueryClient();
  const [open, setOpen] = useState<string>();
  const [newOpen, newModal] = useDisclosure(false);
  const [adminOpen, adminModal] = useDisclosure(false);
  const phone = usePhone();
  const me = useQuery({ queryKey: ['chat', 'me'], queryFn: () => call(api.GET('/chat.ashx?op=me', { params: { query: { op: 'me' } } })) });
  const threads = useQuery({
    queryKey: ['chat', 'threads'],
    queryFn: () => call(api.GET('/chat.ashx?op=list-threads', { params: { query: { op: 'list-threads' } } })),
  });
  const up = useChatSocket((f) => {
    if (f.threadId) void qc.invalidateQueries({ queryKey: ['chat', 'history', f.threadId] });
    if (f.type !== 'typing') void qc.invalidateQueries({ queryKey: ['chat', 'threads'] });
  });
  const list = threads.data?.threads ?? [];
  const current = list.find((x) => x.id === open);
  const label = (x: (typeof list)[number]): string => (x.kind === 'group' ? (x.name ?? x.id) : (x.peer?.login ?? x.id));
  return (
    <Page
      title={t('nav.chat')}
      actions={
        <>
          <Badge color={up ? 'green' : 'gray'} data-testid="chat-socket">
            {up ? t('app.live') : t('app.offline')}
          </Badge>
          <Button onClick={newModal.open} data-testid="chat-new">
            {t('chat.new')}
          </Button>
        </>
      }
    >
      <ErrorNote error={me.error ?? threads.error} />
      <Dialog opened={newOpen} onClose={newModal.close} title={t('chat.new')} size="lg">
        <NewConversation
          onOpened={(id) => {
            setOpen(id);
            newModal.close();
          }}
        />
      </Dialog>
      <Group align="flex-start" wrap={phone ? 'wrap' : 'nowrap'}>
        <Card withBorder w={phone ? '100%' : 260} p={4} component="nav" aria-label={t('chat.threads')}>
          {list.map((x) => (
            <NavLink
              key={x.id}
              label={label(x)}
              description={x.lastMessage?.text ?? ''}
              active={x.id === open}
              // The preview under the active (filled) thread reads in the label's colour, not the dimmed grey (contrast).
              styles={x.id === open ? { description: { color: 'inherit', opacity: 1 } } : undefined}
              variant="filled"
              onClick={() => setOpen(x.id)}
              rightSection={x.unread ? <Badge size="sm">{x.unread}</Badge> : null}
              data-testid={`thread-${label(x)}`}
            />
          ))}
          {threads.data && !list.length && (
            <Text size="sm" c="dimmed" p="sm">
              {t('chat.noThreads')}
            </Text>
          )}
        </Card>
        <Stack style={{ flex: 1 }}>
          {current && me.data ? (
            <>
              <Group justify="space-between">
                <Title order={2} size="h4">
                  {label(current)}
                </Title>
                {current.kind === 'group' && (
                  <Button size="xs" variant="default" onClick={adminModal.open}>
                    {t('chat.manage')}
                  </Button>
                )}
              </Group>
              <Thread threadId={current.id} me={me.data.login} />
              <Dialog opened={adminOpen} onClose={adminModal.close} title={t('chat.manage')}>
                <GroupAdmin
                  groupId={current.id}
                  name={current.name ?? ''}
                  onLeft={() => {
                    adminModal.close();
                    setOpen(undefined);
                  }}
                />
              </Dialog>
            </>
          ) : (
            <Text c="dimmed">{t('chat.pick')}</Text>
          )}
        </Stack>
      </Group>
    </Page>
  );
}
