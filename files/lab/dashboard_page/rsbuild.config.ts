// The page is static: index.html and its scripts, styles and fonts, all from the npm packages (no CDN). It reads
// config.json and dashboard.json beside it at load (the page server writes both).
import { defineConfig } from '@rsbuild/core';
import { pluginReact } from '@rsbuild/plugin-react';

export default defineConfig({
  plugins: [pluginReact()],
  html: { title: 'fairgpu: GPU tenancy' },
  output: { legalComments: 'none' },
  performance: { chunkSplit: { strategy: 'split-by-experience' } },
});
