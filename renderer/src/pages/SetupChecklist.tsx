import { Anchor, Badge, Card, Group, Stack, Text, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { useTranslation } from 'react-i18next';
import { Link } from 'wouter';
import { api, call } from '../api/client.ts';
import { useLabel } from '../components/ui.tsx';

const STATE_COLOR = { done: 'green', todo: 'orange', 'not-available': 'gray' } as const;
/** What to do for the items no console form does (a setting of config.json, a part not built yet). */
const HOW: Record<string, string> = { 'mail-relay': 'dashboard.setupHowMail', 'backup-target': 'dashboard.setupHowBackup' };

/** The server's checklist of what a first call needs (GET /api.ashx/v1/setup/checklist); shown until done. */
export function useSetupChecklist() {
  return useQuery({ queryKey: ['setup', 'checklist'], queryFn: () => call(api.GET('/api.ashx/v1/setup/checklist')) });
}

export function SetupChecklist() {
  const { t } = useTranslation();
  const label = useLabel();
  const q = useSetupChecklist();
  if (!q.data || q.data.done) return null;
  return (
    <Card withBorder data-testid="setup-checklist">
      <Title order={2} size="h4" mb={4}>
        {t('dashboard.setup')}
      </Title>
      <Text size="sm" c="dimmed" mb="sm">
        {t('dashboard.setupIntro')}
      </Text>
      <Stack gap={6} component="ul" style={{ listStyle: 'none', padding: 0, margin: 0 }}>
        {q.data.items.map((i) => (
          <li key={i.id} data-testid={`setup-${i.id}`}>
            <Group gap="xs" wrap="nowrap" align="baseline">
              <Badge color={STATE_COLOR[i.state]} style={{ flexShrink: 0 }}>
                {label('dashboard.setupStates', i.state)}
              </Badge>
              <Text size="sm" fw={600}>
                {label('dashboard.setupItems', i.id)}
              </Text>
              <Text size="sm" c="dimmed" style={{ minWidth: 0, overflowWrap: 'anywhere' }}>
                {i.detail}
              </Text>
              {i.form && i.state === 'todo' && (
                <Anchor component={Link} href={i.form} size="sm">
                  {t('dashboard.setupOpen')}
                </Anchor>
              )}
              {!i.form && i.state !== 'done' && HOW[i.id] && (
                <Text size="sm" c="dimmed">
                  {t(HOW[i.id]!)}
                </Text>
              )}
            </Group>
          </li>
        ))}
      </Stack>
    </Card>
  );
}

/** Where SIP listens, from the same answer: the dashboard shows it always. */
export function SipListens() {
  const { t } = useTranslation();
  const q = useSetupChecklist();
  if (!q.data) return null;
  const sip = q.data.sip;
  return (
    <Text size="sm" data-testid="sip-listens">
      {sip ? (
        <>
          {t('dashboard.sip')}: <b>{`${sip.transports.join('/').toUpperCase()} ${sip.host}:${sip.port}`}</b>
          {!sip.lan && ` (${t('dashboard.sipLoopback')})`}
        </>
      ) : (
        t('dashboard.sipRemote')
      )}
    </Text>
  );
}
