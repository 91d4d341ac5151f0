import { Alert, Button, Card, CopyButton, Group, Loader, Pagination, Table, Text, Title, Stack, Code, Tooltip } from '@mantine/core';
import { useMediaQuery } from '@mantine/hooks';
import { useEffect, useRef, type ReactNode } from 'react';
import { useTranslation } from 'react-i18next';
import { ApiError } from '../api/client.ts';
import { errorText } from '../lib/errors.ts';

/** Narrower than this (Mantine's `sm`), tables read as cards and the header's controls move into the menu. */
const PHONE = '(max-width: 47.99em)';
export function usePhone(): boolean {
  return useMediaQuery(PHONE, window.matchMedia(PHONE).matches, { getInitialValueInEffect: false });
}

/**
 * A page: its heading, its actions, its content. Opening it from the menu (or from anywhere else
 * outside the page) moves focus to the heading, so a screen reader reads where the operator landed
 * and Tab continues in the page, not in the menu (WCAG 2.4.3).
 */
export function Page({ title, actions, children }: { title: string; actions?: ReactNode; children: ReactNode }) {
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    // On a fresh load nothing has focus yet: leave it, so the first Tab reaches the skip link.
    const at = document.activeElement;
    if (at && at !== document.body && !at.closest('main')) heading.current?.focus({ preventScroll: true });
  }, []);
  return (
    <Stack gap="md">
      <Group justify="space-between">
        <Title order={1} size="h2" ref={heading} tabIndex={-1} style={{ outline: 'none' }}>
          {title}
        </Title>
        <Group>{actions}</Group>
      </Group>
      {children}
    </Stack>
  );
}

/** An API or network error in words, where it happened. */
export function ErrorNote({ error }: { error: unknown }) {
  const { t } = useTranslation();
  if (!error) return null;
  return (
    <Alert color="red" title={t('common.error')} role="alert" data-code={error instanceof ApiError ? error.code : undefined}>
      {errorText(error)}
    </Alert>
  );
}

export interface Column<T> {
  key: string;
  label: string;
  render: (row: T) => ReactNode;
}

/** A table of one server page of rows, with the pager below (the server pages; nothing is loaded whole). */
export function DataTable<T>({
  rows,
  columns,
  rowKey,
  loading,
  total,
  page,
  pageSize,
  onPage,
  caption,
}: {
  rows: T[] | undefined;
  columns: Column<T>[];
  rowKey: (r: T) => string;
  loading?: boolean;
  total?: number;
  page?: number;
  pageSize?: number;
  onPage?: (p: number) => void;
  caption: string;
}) {
  const { t } = useTranslation();
  const phone = usePhone();
  const pages = total !== undefined && pageSize ? Math.max(1, Math.ceil(total / pageSize)) : 1;
  return (
    <Stack gap="xs">
      {phone ? (
        // A phone: one card per row, each field under its column's name, nothing cut or scrolled sideways.
        <Stack component="ul" gap="xs" aria-label={caption} p={0} m={0} style={{ listStyle: 'none' }} data-testid="cards">
          {(rows ?? []).map((r) => (
            <Card component="li" withBorder padding="xs" key={rowKey(r)}>
              <Table variant="vertical" layout="fixed" withRowBorders={false} verticalSpacing={4}>
                <Table.Tbody>
                  {columns.map((c) => (
                    <Table.Tr key={c.key}>
                      <Table.Th scope="row" w="38%">
                        {c.label}
                      </Table.Th>
                      <Table.Td style={{ overflowWrap: 'anywhere' }}>{c.render(r)}</Table.Td>
                    </Table.Tr>
                  ))}
                </Table.Tbody>
              </Table>
            </Card>
          ))}
        </Stack>
      ) : (
        <Table.ScrollContainer minWidth={600}>
          <Table striped highlightOnHover verticalSpacing="xs">
            <Table.Caption>{caption}</Table.Caption>
            <Table.Thead>
              <Table.Tr>
                {columns.map((c) => (
                  <Table.Th key={c.key} scope="col">
                    {c.label}
                  </Table.Th>
                ))}
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {(rows ?? []).map((r) => (
                <Table.Tr key={rowKey(r)}>
                  {columns.map((c) => (
                    <Table.Td key={c.key}>{c.render(r)}</Table.Td>
                  ))}
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      )}
      {loading && <Loader size="sm" aria-label={t('common.loading')} />}
      {!loading && rows?.length === 0 && <Text c="dimmed">{t('common.empty')}</Text>}
      {onPage && pages > 1 && (
        <Group justify="space-between">
          <Text size="sm" c="dimmed">
            {t('common.total', { count: total })}
          </Text>
          <Pagination total={pages} value={page ?? 1} onChange={onPage} getControlProps={(c) => ({ 'aria-label': t(`common.pager.${c}`) })} />
        </Group>
      )}
    </Stack>
  );
}

/** A secret the server shows once: copy it now, it will not be shown again. Focus goes to its copy button, the next thing to do. */
export function OnceSecret({ label, value }: { label: string; value: string }) {
  const { t } = useTranslation();
  const copyButton = useRef<HTMLButtonElement>(null);
  useEffect(() => copyButton.current?.focus(), [value]);
  return (
    <Alert color="yellow" title={label} role="status">
      <Stack gap="xs">
        <Text size="sm">{t('common.shownOnce')}</Text>
        <Group>
          <Code data-testid="once-secret" style={{ wordBreak: 'break-all' }}>
            {value}
          </Code>
          <CopyButton value={value}>
            {({ copied, copy }) => (
              <Tooltip label={copied ? t('common.copied') : t('common.copy')}>
                <Button size="xs" variant="light" onClick={copy} ref={copyButton}>
                  {copied ? t('common.copied') : t('common.copy')}
                </Button>
              </Tooltip>
            )}
          </CopyButton>
        </Group>
      </Stack>
    </Alert>
  );
}

export { atField, fieldError } from '../lib/errors.ts';

/**
 * A form that Enter submits, whatever inputs it holds. While it is busy its submit button is
 * disabled, which drops focus to <body>; when the answer is in, focus returns to the first field
 * the API refused, else to the submit button (WCAG 2.4.3), unless something took it meanwhile
 * (a secret shown once takes it for its copy button).
 */
export function Form({ onSubmit, busy, children, ...rest }: { onSubmit: () => void; busy: boolean; children: ReactNode; 'aria-label'?: string }) {
  const form = useRef<HTMLFormElement>(null);
  const was = useRef(busy);
  useEffect(() => {
    const f = form.current;
    if (was.current && !busy && f && (!document.activeElement || document.activeElement === document.body)) {
      (f.querySelector<HTMLElement>('[aria-invalid="true"]') ?? f.querySelector<HTMLElement>('button[type="submit"]'))?.focus();
    }
    was.current = busy;
  }, [busy]);
  return (
    <form
      ref={form}
      {...rest}
      onSubmit={(e) => {
        e.preventDefault();
        onSubmit();
      }}
    >
      {children}
    </form>
  );
}

/**
 * A value the API sends as a code (a role, a state, an audit event) in words, or the code itself
 * when there are none. Dots in a code read as dashes (`webhook.pause` and `webhook-pause` are one
 * text): a dot would nest the key.
 */
export function useLabel(): (group: string, value: string | null | undefined) => string {
  const { t, i18n } = useTranslation();
  return (group, value) => {
    if (value == null || value === '') return '';
    const key = `${group}.${value.replace(/\./g, '-')}`;
    return i18n.exists(key) ? t(key) : value;
  };
}
