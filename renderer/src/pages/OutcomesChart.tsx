import '@mantine/charts/styles.css';
import { BarChart } from '@mantine/charts';
import { useTranslation } from 'react-i18next';

export const FINAL = ['ended-success', 'ended-failed-retry-pending', 'ended-failed-final', 'cancelled'] as const;
const COLORS: Record<string, string> = {
  'ended-success': 'teal.6',
  'ended-failed-retry-pending': 'yellow.6',
  'ended-failed-final': 'red.6',
  cancelled: 'gray.6',
};

/** Call outcomes per hour, stacked (loaded after the dashboard's first paint: the chart library is large). */
export default function OutcomesChart({ data }: { data: Record<string, string | number>[] }) {
  const { t } = useTranslation();
  return (
    <BarChart
      h={220}
      data={data}
      dataKey="hour"
      type="stacked"
      series={FINAL.map((k) => ({ name: k, label: t(`calls.status.${k}`), color: COLORS[k]! }))}
      withLegend
    />
  );
}
