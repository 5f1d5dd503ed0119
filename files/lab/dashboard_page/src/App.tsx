// fairgpu's dashboard page: the Perses dashboard file rendered by Perses's own dashboard view (@perses-dev/dashboards
// ViewDashboard), read-only, its queries sent by the browser straight to the Prometheus that config.json names (one
// global datasource of kind PrometheusDatasource with a directUrl; Prometheus allows the page's origin by CORS).
import { ChartsProvider, generateChartsTheme, getTheme, SnackbarProvider } from '@perses-dev/components';
import type { DashboardResource, DatasourceResource, GlobalDatasourceResource } from '@perses-dev/core';
import { ViewDashboard, type DatasourceApi } from '@perses-dev/dashboards';
import { dynamicImportPluginLoader, PluginRegistry } from '@perses-dev/plugin-system';
import * as prometheusPlugin from '@perses-dev/prometheus-plugin';
import * as timeseriesChartPlugin from '@perses-dev/timeseries-chart-plugin';
import { ThemeProvider, Typography } from '@mui/material';
import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { QueryParamProvider } from 'use-query-params';
import { WindowHistoryAdapter } from 'use-query-params/adapters/window';

// config.json: {"prometheus": "http://127.0.0.1:<port>"}, written by the page server from the run's settings.
export interface PageConfig {
  prometheus: string;
}

// The only datasource: the run's Prometheus, as a global datasource every panel and variable defaults to.
class RunPrometheus implements DatasourceApi {
  private readonly datasource: GlobalDatasourceResource;

  constructor(url: string) {
    this.datasource = {
      kind: 'GlobalDatasource',
      metadata: { name: 'prometheus' },
      spec: { default: true, plugin: { kind: 'PrometheusDatasource', spec: { directUrl: url } } },
    };
  }

  getDatasource(): Promise<DatasourceResource | undefined> {
    return Promise.resolve(undefined);
  }

  getGlobalDatasource(): Promise<GlobalDatasourceResource | undefined> {
    return Promise.resolve(this.datasource);
  }

  listDatasources(): Promise<DatasourceResource[]> {
    return Promise.resolve([]);
  }

  listGlobalDatasources(): Promise<GlobalDatasourceResource[]> {
    return Promise.resolve([this.datasource]);
  }

  buildProxyUrl(): string {
    return String(this.datasource.spec.plugin.spec.directUrl);
  }
}

// The two plugins the dashboard uses, bundled into the page (no plugin is fetched at run time).
const pluginLoader = dynamicImportPluginLoader([
  { resource: prometheusPlugin.getPluginModule(), importPlugin: () => Promise.resolve(prometheusPlugin) },
  { resource: timeseriesChartPlugin.getPluginModule(), importPlugin: () => Promise.resolve(timeseriesChartPlugin) },
]);

const queryClient = new QueryClient({ defaultOptions: { queries: { refetchOnWindowFocus: false, retry: 0 } } });

export default function App({ config, dashboard }: { config: PageConfig; dashboard: DashboardResource }) {
  const theme = getTheme('light');
  const title = dashboard.spec.display?.name ?? dashboard.metadata.name;
  return (
    <ThemeProvider theme={theme}>
      <ChartsProvider chartsTheme={generateChartsTheme(theme, {})}>
        <SnackbarProvider anchorOrigin={{ vertical: 'bottom', horizontal: 'right' }} variant="default" content="">
          <QueryParamProvider adapter={WindowHistoryAdapter}>
            <PluginRegistry pluginLoader={pluginLoader}>
              <QueryClientProvider client={queryClient}>
                <ViewDashboard
                  dashboardResource={dashboard}
                  datasourceApi={new RunPrometheus(config.prometheus)}
                  dashboardTitleComponent={<Typography variant="h2">{title}</Typography>}
                  isReadonly={true}
                  isVariableEnabled={true}
                  isDatasourceEnabled={false}
                />
              </QueryClientProvider>
            </PluginRegistry>
          </QueryParamProvider>
        </SnackbarProvider>
      </ChartsProvider>
    </ThemeProvider>
  );
}
