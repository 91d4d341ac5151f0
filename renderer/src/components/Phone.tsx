import { Affix, Badge, Button, Group, Paper, Stack, Switch, Text } from '@mantine/core';
import { useEffect, useRef, useState } from 'react';
import { useTranslation } from 'react-i18next';
import { OfficePhone, type PhoneState } from '../phone.ts';

/**
 * The office tab's controls: a "Phone" switch in the header (this tab rings for the signed-in
 * user while it is on) and, while a call rings or is up, a panel with the caller and
 * Accept / Decline / Hang up. The panel is an alertdialog so screen readers announce the ring.
 */
export function PhoneControls() {
  const { t } = useTranslation();
  const audio = useRef<HTMLAudioElement>(null);
  const phone = useRef<OfficePhone | undefined>(undefined);
  const [state, setState] = useState<PhoneState>({ kind: 'off' });
  const [now, setNow] = useState(() => Date.now());

  useEffect(() => () => phone.current?.stop(), []);
  useEffect(() => {
    if (state.kind !== 'in-call') return;
    const i = window.setInterval(() => setNow(Date.now()), 1000);
    return () => window.clearInterval(i);
  }, [state.kind]);

  const get = (): OfficePhone => {
    if (!phone.current) {
      phone.current = new OfficePhone(audio.current!);
      phone.current.subscribe(setState);
    }
    return phone.current;
  };

  const on = state.kind !== 'off';
  const ring = state.kind === 'ringing' || state.kind === 'answering' || state.kind === 'in-call' ? state.ring : undefined;
  const caller = !ring
    ? ''
    : ring.callerName && ring.callerNumber
      ? `${ring.callerName} (${ring.callerNumber})`
      : ring.callerName || ring.callerNumber || t('phone.anonymous');
  const secs = state.kind === 'in-call' ? Math.max(0, Math.floor((now - state.since) / 1000)) : 0;

  return (
    <>
      <Group gap={6}>
        <Switch
          size="sm"
          label={t('phone.toggle')}
          checked={on}
          data-testid="phone-toggle"
          onChange={(e) => (e.currentTarget.checked ? get().start() : get().stop())}
        />
        {on && (
          <Badge size="sm" color={state.kind === 'connecting' ? 'gray' : 'teal'} data-testid="phone-state" data-state={state.kind}>
            {t(`phone.state.${state.kind}`)}
          </Badge>
        )}
      </Group>
      <audio ref={audio} autoPlay hidden data-testid="phone-audio" />
      {(ring || state.kind === 'ended') && (
        <Affix position={{ bottom: 20, right: 20 }}>
          <Paper shadow="md" p="md" withBorder role="alertdialog" aria-live="assertive" aria-label={t('phone.panel')} data-testid="phone-panel">
            <Stack gap="xs">
              {state.kind === 'ringing' && (
                <>
                  <Text fw={700} data-testid="phone-ringing">
                    {t('phone.incoming', { caller })}
                  </Text>
                  <Group>
                    <Button color="green" onClick={() => void get().accept()} data-testid="phone-accept">
                      {t('phone.accept')}
                    </Button>
                    <Button color="red" variant="light" onClick={() => void get().decline()} data-testid="phone-decline">
                      {t('phone.decline')}
                    </Button>
                  </Group>
                </>
              )}
              {(state.kind === 'answering' || state.kind === 'in-call') && (
                <>
                  <Text fw={700} data-testid="phone-in-call">
                    {state.kind === 'answering' ? t('phone.connecting', { caller }) : t('phone.inCall', { caller, secs })}
                  </Text>
                  <Button color="red" onClick={() => void get().hangup()} data-testid="phone-hangup">
                    {t('phone.hangup')}
                  </Button>
                </>
              )}
              {state.kind === 'ended' && (
                <Group>
                  <Text data-testid="phone-ended">{t('phone.ended')}</Text>
                  <Button size="xs" variant="default" onClick={() => get().dismiss()}>
                    {t('phone.dismiss')}
                  </Button>
                </Group>
              )}
            </Stack>
          </Paper>
        </Affix>
      )}
    </>
  );
}
