import { Anchor, Stack, Text } from '@mantine/core';
import { useTranslation } from 'react-i18next';
import { current } from '../auth.ts';

/** What an account with role `user` sees first: the admin pages' API answers them 403, so none are offered. */
export default function UserHome() {
  const { t } = useTranslation();
  return (
    <Stack>
      <Text component="h1" size="xl" fw={700}>
        {t('user.welcome', { name: current()?.user.name ?? '' })}
      </Text>
      <Text>{t('user.noAdmin')}</Text>
      <Anchor href="/passkeys.html">{t('nav.passkeys')}</Anchor>
    </Stack>
  );
}
