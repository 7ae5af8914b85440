import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

// `npm run dev -w web` serves the dashboard with hot reload; the API calls go to a running gateway.
const gateway = process.env.PAYGATE_GATEWAY_URL ?? 'http://127.0.0.1:8080';

export default defineConfig({
  plugins: [react()],
  server: {
    host: '127.0.0.1',
    proxy: {
      '/v1': gateway,
      '/graphql': gateway,
      '/health': gateway,
    },
  },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    sourcemap: true,
    // wagmi, viem and the smart-accounts kit make one ~1.2 MB (300 kB gzipped) bundle, loaded once and cached
    chunkSizeWarningLimit: 1600,
  },
});
