import '@mantine/core/styles.css';
import '@mantine/notifications/styles.css';
import { createTheme, MantineProvider, type CSSVariablesResolver } from '@mantine/core';
import { Notifications } from '@mantine/notifications';
import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { App } from './App.tsx';
import './i18n.ts';

const queries = new QueryClient({
  defaultOptions: { queries: { staleTime: 5_000, retry: 1, refetchOnWindowFocus: true } },
});
// autoContrast: text on filled badges and buttons is black or white, whichever reads (axe, WCAG AA).
const theme = createTheme({
  primaryColor: 'indigo',
  focusRing: 'always',
  defaultRadius: 'sm',
  primaryShade: { light: 7, dark: 8 },
  autoContrast: true,
  luminanceThreshold: 0.25,
  components: { Badge: { defaultProps: { variant: 'filled' } } },
});

// "Dimmed" text a shade darker than Mantine's default, so it keeps a 4.5:1 contrast (WCAG AA) in both schemes.
const resolver: CSSVariablesResolver = () => ({
  variables: {},
  light: { '--mantine-color-dimmed': 'var(--mantine-color-gray-7)' },
  dark: { '--mantine-color-dimmed': 'var(--mantine-color-dark-1)' },
});

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    {/* Dark and light follow the operating system (color-scheme "auto"). */}
    <MantineProvider theme={theme} defaultColorScheme="auto" cssVariablesResolver={resolver}>
      <Notifications />
      <QueryClientProvider client={queries}>
        <App />
      </QueryClientProvider>
    </MantineProvider>
  </StrictMode>,
);
