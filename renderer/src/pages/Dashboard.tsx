import { Badge, Card, Group, Loader, SimpleGrid, Stack, Table, Text, Title } from '@mantine/core';
import { lazy, Suspense } from 'react';
import { useQuery } from '@tanstack/react-query';
import { useTranslation } from 'react-i18next';
import { api, call } from '../api/client.ts';
import { when } from '../i18n.ts';
import { useLive } from '../lib/live-context.ts';
import { ErrorNote, Page, useLabel } from '../components/ui.tsx';
import { FINAL_STATES } from '../lib/calls.ts';
import { SetupChecklist, SipListens } from './SetupChecklist.tsx';

const OutcomesChart = lazy(() => import('./OutcomesChart.tsx'));

function Stat({ label, value, testId }: { label: string; value: string | number; testId: string }) {
  return (
    <Card withBorder padding="md">
      <Text size="sm" c="dimmed">
        {label}
      </Text>
      <Text size="xl" fw={700} data-testid={testId}>
        {value}
      </Text>
    </Card>
  );
}

export function Dashboard() {
  const { t, i18n } = useTranslation();
  const label = useLabel();
  const live = useLive();
  const today = new Date();
  today.setHours(0, 0, 0, 0);
  const stats = useQuery({
    queryKey: ['calls', 'stats', today.toISOString()],
    queryFn: () => call(api.GET('/api.ashx/v1/calls/stats', { params: { query: { since: today.toISOString() } } })),
  });
  const trunks = useQuery({
    queryKey: ['status', 'trunks'],
    queryFn: () => call(api.GET('/signal.ashx?trunks=list', { params: { query: { trunks: 'list' } } })),
  });
  const hooks = useQuery({
    queryKey: ['webhooks', 'list'],
    queryFn: () => call(api.GET('/signal.ashx?webhooks=list', { params: { query: { webhooks: 'list' } } })),
  });
  const lotl = useQuery({ queryKey: ['status', 'lotl'], queryFn: () => call(api.GET('/lotl.ashx?status', { params: { query: { status: '' } } })) });
  const ca = useQuery({ queryKey: ['status', 'ca'], queryFn: () => call(api.GET('/rp-cert.ashx?status', { params: { query: { status: '' } } })) });
  // Super-admins only (others are answered 403): the card is left out for them, not an error.
  const backup = useQuery({ queryKey: ['backups', 'status'], queryFn: () => call(api.GET('/api.ashx/v1/backups/status')), retry: false });
  const stale = (lotl.data?.lists ?? []).filter((l) => l.stale);
  const s = stats.data;
  const chart = (s?.hours ?? []).map((h) => ({
    // The hour in the UI's language, not the browser's.
    hour: new Date(h.hour).toLocaleTimeString(i18n.language, { hour: '2-digit', minute: '2-digit' }),
    ...Object.fromEntries(FINAL_STATES.map((k) => [k, h.counts[k] ?? 0])),
  }));
  const paused = (hooks.data ?? []).filter((w) => !w.active).length;
  const failing = (hooks.data ?? []).filter((w) => w.active && w.failures > 0).length;
  return (
    <Page title={t('nav.dashboard')}>
      <ErrorNote error={stats.error ?? trunks.error ?? hooks.error ?? lotl.error ?? ca.error} />
      <SetupChecklist />
      <SimpleGrid cols={{ base: 2, md: 4 }}>
        <Stat label={t('dashboard.callsToday')} value={s?.total ?? '…'} testId="calls-today" />
        <Stat label={t('dashboard.inFlight')} value={s?.inFlight ?? '…'} testId="calls-in-flight" />
        <Stat label={t('dashboard.scheduled')} value={s?.scheduled ?? '…'} testId="calls-scheduled" />
        <Stat label={t('dashboard.webhooksPaused')} value={hooks.data ? `${paused} / ${failing}` : '…'} testId="webhooks-paused" />
      </SimpleGrid>
      <Card withBorder>
        <Title order={2} size="h4" mb="sm">
          {t('dashboard.outcomes')}
        </Title>
        <Suspense fallback={<Loader size="sm" />}>
          <OutcomesChart data={chart} />
        </Suspense>
      </Card>
      <SimpleGrid cols={{ base: 1, md: 2 }}>
        <Card withBorder>
          <Title order={2} size="h4" mb="sm">
            {t('dashboard.trunks')}
          </Title>
          <Table>
            <Table.Tbody>
              {(trunks.data?.trunks ?? []).map((tr) => (
                <Table.Tr key={tr.id}>
                  <Table.Td>{tr.name || tr.id}</Table.Td>
                  <Table.Td>
                    <Badge color={tr.registered === true ? 'green' : tr.registered === false ? 'red' : 'gray'}>
                      {tr.registered === true ? t('telephony.registered') : tr.registered === false ? t('telephony.notRegistered') : t('telephony.unknown')}
                    </Badge>
                  </Table.Td>
                  <Table.Td>{tr.lastError ?? ''}</Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
          {trunks.data && !trunks.data.trunks.length && <Text c="dimmed">{t('dashboard.noTrunks')}</Text>}
          <SipListens />
        </Card>
        <Card withBorder>
          <Title order={2} size="h4" mb="sm">
            {t('dashboard.trust')}
          </Title>
          <Stack gap={4}>
            <Text size="sm">
              {t('trust.state')}: <b data-testid="lotl-state">{lotl.data ? label('trust.states', lotl.data.state) : '…'}</b>
            </Text>
            <Text size="sm">
              {t('trust.asOf')}: {when(lotl.data?.as_of)}
            </Text>
            <Text size="sm">
              {t('trust.anchors')}: {lotl.data?.anchor_count ?? '…'}
            </Text>
            <Text size="sm">
              {t('dashboard.staleLists')}:{' '}
              <b data-testid="lotl-stale">{lotl.data ? (stale.length ? stale.map((l) => l.territory).join(', ') : t('dashboard.none')) : '…'}</b>
            </Text>
          </Stack>
        </Card>
        <Card withBorder>
          <Title order={2} size="h4" mb="sm">
            {t('dashboard.ca')}
          </Title>
          <Stack gap={4}>
            {ca.data && !ca.data.initialized && <Text size="sm">{t('dashboard.caNone')}</Text>}
            {ca.data?.initialized && (
              <>
                <Text size="sm">
                  {t('dashboard.caKey')}: <b data-testid="ca-key-store">{t(`dashboard.caStore.${ca.data.key_store ?? 'software'}`)}</b>{' '}
                  <Badge color={ca.data.key_ready ? 'green' : 'red'} data-testid="ca-key-ready" title={ca.data.key_problem ?? ''}>
                    {ca.data.key_ready ? t('dashboard.caReady') : t('dashboard.caUnreachable')}
                  </Badge>
                </Text>
                {!ca.data.key_ready && ca.data.key_problem && (
                  <Text size="sm" c="red">
                    {ca.data.key_problem}
                  </Text>
                )}
                <Text size="sm">
                  {t('certs.notAfter')}: {when(ca.data.not_after)}
                </Text>
                <Text size="sm">
                  {t('dashboard.caIssued', { count: ca.data.issued ?? 0 })}, {t('dashboard.caRevoked', { count: ca.data.revoked ?? 0 })}
                </Text>
              </>
            )}
            <Text size="sm">
              {t('dashboard.masterKey')}: <b data-testid="master-key-store">{live.masterKey ? t(`dashboard.keyStore.${live.masterKey}`) : '…'}</b>
            </Text>
          </Stack>
        </Card>
        {backup.data && (
          <Card withBorder>
            <Title order={2} size="h4" mb="sm">
              {t('dashboard.backup')}
            </Title>
            <Stack gap={4}>
              <Text size="sm">
                {t('backups.health')}:{' '}
                <Badge
                  data-testid="dashboard-backup-health"
                  color={backup.data.health === 'ok' ? 'green' : backup.data.health === 'unconfigured' ? 'gray' : 'red'}
                >
                  {t(`backups.healthStates.${backup.data.health}`)}
                </Badge>
              </Text>
              <Text size="sm">
                {t('backups.lastSuccess')}: {backup.data.lastSuccess ? when(backup.data.lastSuccess.at) : t('backups.never')}
              </Text>
              {backup.data.lastFailure && (
                <Text size="sm" c="red">
                  {t('backups.lastFailure')}: {when(backup.data.lastFailure.at)}: {backup.data.lastFailure.reason}
                </Text>
              )}
              <Text size="sm">
                {t('backups.nextRun')}: {backup.data.nextRun ? when(backup.data.nextRun) : '–'}
              </Text>
            </Stack>
          </Card>
        )}
      </SimpleGrid>
      <Card withBorder>
        <Title order={2} size="h4" mb="sm">
          {t('dashboard.plugins')}
        </Title>
        <Group>
          {Object.entries(live.status).map(([name, p]) => (
            <Badge
              key={name}
              size="lg"
              color={p.state !== 'started' ? 'red' : p.health?.status === 'degraded' ? 'orange' : 'green'}
              title={p.error ?? p.health?.reason ?? ''}
            >
              {name}: {p.state !== 'started' ? label('dashboard.pluginStates', p.state) : label('dashboard.health', p.health?.status ?? 'ok')}
            </Badge>
          ))}
        </Group>
        {/* A degraded plugin says why in words (the SIP port taken, and the setting to change), not only in a tooltip. */}
        {Object.entries(live.status)
          .filter(([, p]) => p.state === 'started' && p.health?.status === 'degraded' && p.health.reason)
          .map(([name, p]) => (
            <Text key={name} size="sm" fw={600} mt="xs" data-testid={`plugin-reason-${name}`}>
              {name}: {p.health?.reason}
            </Text>
          ))}
      </Card>
    </Page>
  );
}
