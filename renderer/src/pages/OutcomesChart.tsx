import '@mantine/charts/styles.css';
import { BarChart } from '@mantine/charts';
import { useTranslation } from 'react-i18next';
import { callState, FINAL_STATES } from '../lib/calls.ts';

/** Call outcomes per hour, stacked (loaded after the dashboard's first paint: the chart library is large). */
export default function OutcomesChart({ data }: { data: Record<string, string | number>[] }) {
  const { t } = useTranslation();
  return (
    <BarChart
      h={220}
      data={data}
      dataKey="hour"
      type="stacked"
      series={FINAL_STATES.map((k) => ({ name: k, label: t(`calls.status.${k}`), color: `${callState(k)!.color}.6` }))}
      withLegend
      // Counts of calls: whole numbers only on the axis (never 0.25).
      yAxisProps={{ allowDecimals: false }}
    />
  );
}
