import { Anchor, AppShell, Badge, Burger, Button, Center, Group, Loader, NavLink, NativeSelect, Stack, Text, Alert } from '@mantine/core';
import { useDisclosure } from '@mantine/hooks';
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { Suspense, useEffect, useState } from 'react';
import { useTranslation } from 'react-i18next';
import { Link, Route, Router, Switch, useLocation } from 'wouter';
import { completeSignIn, current, onSession, signIn, signOut, type Session } from './auth.ts';
import { LANGUAGES, setLanguage, type Language } from './i18n.ts';
import { api, call } from './api/client.ts';
import { connectLive, type PluginStatus } from './live.ts';
import { actingTenant, onActingTenant, setActingTenant } from './tenant.ts';
import { LiveContext } from './lib/live-context.ts';
import { refreshesFor } from './lib/live-refresh.ts';
import { pagesFor, roleOf } from './pages.ts';
import { PhoneControls } from './components/Phone.tsx';
import { usePhone } from './components/ui.tsx';

/**
 * A super-admin's tenant switcher: the admin pages act on the chosen tenant (README "Tenant
 * switch"). Shown only when the API says the caller is a super-admin and there is more than one.
 */
function TenantSwitcher({ session, acting }: { session: Session; acting: string | undefined }) {
  const { t } = useTranslation();
  const tenants = useTenants(session);
  const all = tenants.data?.superAdmin ? tenants.data.data : [];
  if (all.length < 2) return null;
  const own = all.find((x) => x.primary)?.host ?? session.user.tenant;
  return (
    <NativeSelect
      aria-label={t('app.tenant')}
      size="xs"
      data-testid="tenant-switcher"
      value={acting ?? own}
      onChange={(e) => setActingTenant(e.currentTarget.value === own ? undefined : e.currentTarget.value)}
      data={all.map((x) => ({ value: x.host, label: x.name && x.name !== x.host ? `${x.name} (${x.host})` : x.host }))}
    />
  );
}

/** The tenants an admin may see (a super-admin: all); others are answered 403 and not asked. */
function useTenants(session: Session) {
  return useQuery({
    queryKey: ['tenant-switcher'],
    queryFn: () => call(api.GET('/api.ashx/v1/tenants')),
    enabled: session.user.role === 'admin',
    staleTime: 60_000,
  });
}

/**
 * The tenant this console is signed in to, by name: the one this host name belongs to, or the
 * primary one, which answers every host name no tenant claims (a bare IP address, say). An
 * account that may not list tenants sees the host name.
 */
function TenantName({ session }: { session: Session }) {
  const tenants = useTenants(session);
  const all = tenants.data?.data ?? [];
  const own = all.find((x) => x.hosts.includes(location.hostname)) ?? all.find((x) => x.primary);
  return <>{own ? own.name || own.host : location.hostname}</>;
}

/** Language, tenant, who is signed in, sign-out: in the header on a desktop, in the menu on a phone. */
function AccountControls({ session, acting }: { session: Session; acting: string | undefined }) {
  const { t, i18n } = useTranslation();
  return (
    <>
      <TenantSwitcher session={session} acting={acting} />
      <NativeSelect
        aria-label={t('app.language')}
        size="xs"
        value={i18n.language}
        onChange={(e) => setLanguage(e.currentTarget.value as Language)}
        data={Object.entries(LANGUAGES).map(([value, label]) => ({ value, label }))}
      />
      <Text size="sm" data-testid="signed-in-user">
        {session.user.name} · <TenantName session={session} />
      </Text>
      <Button size="xs" variant="default" onClick={() => void signOut()}>
        {t('app.signOut')}
      </Button>
    </>
  );
}

function Shell({ session }: { session: Session }) {
  const { t } = useTranslation();
  const phone = usePhone();
  const role = roleOf(session.user.role);
  const admin = role === 'admin';
  const pages = pagesFor(role);
  const [opened, { toggle }] = useDisclosure();
  const [location] = useLocation();
  const queries = useQueryClient();
  const [online, setOnline] = useState(true);
  const [status, setStatus] = useState<Record<string, PluginStatus>>({});
  const [lastEvent, setLastEvent] = useState(0);
  const [masterKey, setMasterKey] = useState<string>();
  const [acting, setActing] = useState(actingTenant());
  // Another tenant: nothing cached from the last one may show, and the live feed follows.
  useEffect(
    () =>
      onActingTenant((host) => {
        queries.removeQueries({ predicate: (q) => q.queryKey[0] !== 'tenant-switcher' });
        setActing(host);
      }),
    [queries],
  );

  useEffect(() => {
    // The live feed is an admin's (the API answers others 403).
    if (!admin) return undefined;
    // Delivery notices can come hundreds a second: each open delivery log fetches again at most
    // every 250 ms, and a fetch already on its way is reused rather than cancelled.
    const due = new Set<string>();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const deliveriesChanged = (subscriptionId: string | undefined) => {
      due.add(subscriptionId ?? '*');
      timer ??= setTimeout(() => {
        timer = undefined;
        for (const id of due) {
          const queryKey = id === '*' ? ['webhooks'] : ['webhooks', 'deliveries', id];
          void queries.invalidateQueries({ queryKey }, { cancelRefetch: false });
        }
        due.clear();
      }, 250);
    };
    let wasOnline = true;
    const stop = connectLive({
      onEvent: (e) => {
        setLastEvent(e.id);
        // The views that show what the event changed fetch again (lib/live-refresh.ts).
        for (const queryKey of refreshesFor(e.name)) void queries.invalidateQueries({ queryKey });
      },
      onNotice: (n) => {
        if (n.name !== 'webhook.delivery') {
          for (const queryKey of refreshesFor(n.name)) void queries.invalidateQueries({ queryKey });
          return;
        }
        const sub = n.data.subscriptionId;
        // Without a delivery id several rows changed (a pause, a resume): the list too.
        deliveriesChanged(typeof sub === 'string' && typeof n.data.deliveryId === 'string' ? sub : undefined);
      },
      onStatus: (s, key) => {
        setStatus(s);
        setMasterKey(key);
        void queries.invalidateQueries({ queryKey: ['status'] });
      },
      onReset: () => void queries.invalidateQueries(),
      onConnection: (up) => {
        // Notices are not replayed: after a drop, what they would have updated loads again.
        if (up && !wasOnline) void queries.invalidateQueries({ queryKey: ['webhooks'] });
        wasOnline = up;
        setOnline(up);
      },
    });
    return () => {
      stop();
      clearTimeout(timer);
    };
  }, [queries, admin, acting]);

  return (
    <LiveContext.Provider value={{ online, status, lastEvent, masterKey }}>
      <Anchor
        href="#main"
        className="skip-link"
        data-testid="skip-link"
        onClick={(e) => {
          e.preventDefault();
          document.querySelector<HTMLElement>('main h1')?.focus();
        }}
      >
        {t('app.skip')}
      </Anchor>
      <AppShell header={{ height: 56 }} navbar={{ width: 230, breakpoint: 'sm', collapsed: { mobile: !opened } }} padding="md">
        <AppShell.Header>
          <Group h="100%" px="md" justify="space-between" wrap="nowrap">
            <Group wrap="nowrap" gap="sm">
              <Burger opened={opened} onClick={toggle} hiddenFrom="sm" size="sm" aria-label={t('nav.menu')} aria-expanded={opened} data-testid="menu-button" />
              <Text fw={700} visibleFrom="xs">
                {t('app.name')}
              </Text>
              <Badge color={online ? 'green' : 'red'} data-testid="live-badge">
                {online ? t('app.live') : t('app.offline')}
              </Badge>
            </Group>
            <Group wrap="nowrap" gap="sm">
              <PhoneControls />
              {!phone && <AccountControls session={session} acting={acting} />}
            </Group>
          </Group>
        </AppShell.Header>
        <AppShell.Navbar p="xs" component="nav" aria-label={t('nav.menu')}>
          {phone && (
            <Stack gap="xs" mb="sm" data-testid="menu-account">
              <AccountControls session={session} acting={acting} />
            </Stack>
          )}
          {pages
            .filter((n) => n.menu !== false)
            .map((n) => (
              <NavLink
                key={n.key}
                component={Link}
                href={n.path}
                label={t(`nav.${n.key}`)}
                variant="filled"
                active={n.path === '/' ? location === '/' : location.startsWith(n.path)}
                aria-current={(n.path === '/' ? location === '/' : location.startsWith(n.path)) ? 'page' : undefined}
                onClick={() => opened && toggle()}
              />
            ))}
          <NavLink href="/passkeys.html" label={t('nav.passkeys')} />
        </AppShell.Navbar>
        <AppShell.Main id="main">
          {!online && (
            <Alert color="orange" mb="md" role="status" data-testid="offline-banner">
              {t('app.connectionLost')}
            </Alert>
          )}
          <Suspense fallback={<Loader aria-label={t('common.loading')} />}>
            <Switch key={acting ?? ''}>
              {pages.map((n) => (
                <Route key={n.key} path={n.path} component={n.page} />
              ))}
              <Route>
                <Text>{t('common.notFound')}</Text>
              </Route>
            </Switch>
          </Suspense>
        </AppShell.Main>
      </AppShell>
    </LiveContext.Provider>
  );
}

export function App() {
  const { t } = useTranslation();
  const [session, setSession] = useState<Session | undefined>(current());
  const [error, setError] = useState<string>();
  useEffect(() => onSession(setSession), []);
  useEffect(() => {
    if (session) return;
    if (location.pathname === '/console/callback') {
      completeSignIn().then(
        (to) => history.replaceState(null, '', to),
        (e: unknown) => setError(e instanceof Error ? e.message : String(e)),
      );
    } else {
      void signIn();
    }
  }, [session]);
  if (error)
    return (
      <Center h="100vh">
        <Stack>
          <Alert color="red" title={t('app.signInFailed')} role="alert">
            {error}
          </Alert>
          <Button onClick={() => void signIn('/console/')}>{t('app.signIn')}</Button>
        </Stack>
      </Center>
    );
  if (!session)
    return (
      <Center h="100vh">
        <Loader aria-label={t('app.signingIn')} />
      </Center>
    );
  return (
    <Router base="/console">
      <Shell session={session} />
    </Router>
  );
}
