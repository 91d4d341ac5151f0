import { Alert, Button, CopyButton, Group, Loader, Pagination, Table, Text, Title, Stack, Code, Tooltip } from '@mantine/core';
import type { ReactNode } from 'react';
import { useTranslation } from 'react-i18next';
import { ApiError } from '../api/client.ts';

export function Page({ title, actions, children }: { title: string; actions?: ReactNode; children: ReactNode }) {
  return (
    <Stack gap="md">
      <Group justify="space-between">
        <Title order={1} size="h2">
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
  const msg = error instanceof ApiError ? `${error.message} (${error.code})` : error instanceof Error ? error.message : String(error);
  return (
    <Alert color="red" title={t('common.error')} role="alert">
      {msg}
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
  const pages = total !== undefined && pageSize ? Math.max(1, Math.ceil(total / pageSize)) : 1;
  return (
    <Stack gap="xs">
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

/** A secret the server shows once: copy it now, it will not be shown again. */
export function OnceSecret({ label, value }: { label: string; value: string }) {
  const { t } = useTranslation();
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
                <Button size="xs" variant="light" onClick={copy}>
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

/** The field an API error names, for a form input's `error` prop. */
export function fieldError(error: unknown, field: string): string | undefined {
  return error instanceof ApiError && error.field === field ? error.message : undefined;
}
