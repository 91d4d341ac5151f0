import '@mantine/core/styles.css';
import '@mantine/notifications/styles.css';
import './app.css';
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
// autoContrast: text on filled badges and buttons is black or white, whichever reads better. At a
// luminance of 0.179 both give the same contrast (4.58:1), so this threshold keeps every filled
// colour at or above WCAG AA's 4.5:1 (Mantine's 0.3 default left white on red at 3.8:1).
const theme = createTheme({
  primaryColor: 'indigo',
  focusRing: 'always',
  defaultRadius: 'sm',
  primaryShade: { light: 7, dark: 8 },
  autoContrast: true,
  luminanceThreshold: 0.179,
  components: {
    // A badge's label wraps rather than being cut to "S..." on a narrow screen.
    Badge: {
      defaultProps: { variant: 'filled' },
      styles: { root: { height: 'auto', minHeight: 'var(--badge-height)', maxWidth: '100%' }, label: { whiteSpace: 'normal', overflow: 'visible' } },
    },
    // A dialog's header is a plain box: a <header> there is a second banner landmark (axe).
    ModalHeader: { defaultProps: { component: 'div' } },
  },
});

// Text of "light" buttons and badges in the light scheme, dark enough for 4.5:1 on their tinted
// background (shade 9, or shade 9 darkened where even that is too light). Orange is measured on
// orange 1 (#ffe8cc, its tint in a striped or hovered row): #a8380b gives 5.5:1 there.
const LIGHT_TEXT: Record<string, string> = {
  red: 'var(--mantine-color-red-9)',
  indigo: 'var(--mantine-color-indigo-9)',
  blue: 'var(--mantine-color-blue-9)',
  gray: 'var(--mantine-color-gray-9)',
  teal: '#087a57',
  green: '#277c38',
  yellow: '#a65600',
  orange: '#a8380b',
};

// "Dimmed" text a shade darker than Mantine's default, so it keeps a 4.5:1 contrast (WCAG AA) in both schemes.
const resolver: CSSVariablesResolver = () => ({
  variables: {},
  light: {
    '--mantine-color-dimmed': 'var(--mantine-color-gray-7)',
    // Error text and borders: red 6 (3.3:1 on white) and red 8 (3.4:1 on the dark body) are too light.
    '--mantine-color-error': 'var(--mantine-color-red-9)',
    ...Object.fromEntries(Object.entries(LIGHT_TEXT).map(([c, v]) => [`--mantine-color-${c}-light-color`, v])),
  },
  dark: { '--mantine-color-dimmed': 'var(--mantine-color-dark-1)', '--mantine-color-error': 'var(--mantine-color-red-4)' },
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
