import React from 'react';
import ReactDOM from 'react-dom/client';
import App from './App';

// The page server writes config.json (where Prometheus answers) and dashboard.json (the Perses dashboard) beside
// index.html.
async function main(root: HTMLElement) {
  const [config, dashboard] = await Promise.all(
    ['config.json', 'dashboard.json'].map(async (name) => {
      const response = await fetch(name);
      if (!response.ok) {
        throw new Error(`${name}: HTTP ${response.status}`);
      }
      return response.json();
    })
  );
  ReactDOM.createRoot(root).render(
    <React.StrictMode>
      <App config={config} dashboard={dashboard} />
    </React.StrictMode>
  );
}

const root = document.getElementById('root');
if (root) {
  main(root).catch((error: Error) => {
    root.textContent = `fairgpu dashboard page: ${error.message}`;
  });
}
