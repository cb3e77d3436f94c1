import { defineConfig } from 'vitest/config';
import preact from '@preact/preset-vite';

// The app is embedded in the Go binary from dist/app (see ../web.go); dist/
// itself holds a committed placeholder so that go:embed compiles without Node.
export default defineConfig({
  plugins: [preact()],
  build: {
    outDir: 'dist/app',
    emptyOutDir: true,
    // Hashed names let the server cache them forever.
    assetsDir: 'assets',
    target: 'es2022',
    sourcemap: false,
  },
  server: {
    // `npm run dev` proxies the API to a local `tandem serve`.
    proxy: { '/v1': 'http://127.0.0.1:7433' },
  },
  test: {
    environment: 'jsdom',
    include: ['src/**/*.test.ts', 'src/**/*.test.tsx'],
  },
});
